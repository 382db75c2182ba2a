package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/checksum"
	"github.com/ferry-upgrade/ferry/internal/config"
)

// ImportedFile holds the releases imported through POST /v1/releases,
// in the data directory, so that they outlive the server; they are
// added to the description's catalog at every start (LoadImported).
const ImportedFile = "releases.json"

// ImportRequest is the body of POST /v1/releases: a release as the
// description's catalog would list it (no migrations: those belong in
// the description, reviewed with it).
type ImportRequest struct {
	Version     string                    `json:"version"`
	UpgradeFrom []string                  `json:"upgrade_from,omitempty"`
	DowngradeTo []string                  `json:"downgrade_to,omitempty"`
	Artifacts   map[string]ImportArtifact `json:"artifacts"`
}

// ImportArtifact is an artifact of an imported release. A path must be
// absolute: it is read on the server's machine, and its SHA-256 checked
// before the release is accepted.
type ImportArtifact struct {
	Path   string `json:"path,omitempty"`
	Image  string `json:"image,omitempty"`
	SHA256 string `json:"sha256"`
}

// importView is rel in the import's form: the answer of POST
// /v1/releases and a record of releases.json.
func importView(rel config.Release) ImportRequest {
	ir := ImportRequest{Version: rel.Version, UpgradeFrom: rel.UpgradeFrom, DowngradeTo: rel.DowngradeTo, Artifacts: map[string]ImportArtifact{}}
	for k, a := range rel.Artifacts {
		ir.Artifacts[k] = ImportArtifact{Path: a.Path, Image: a.Image, SHA256: a.SHA256}
	}
	return ir
}

func (ir ImportRequest) release() config.Release {
	r := config.Release{Version: ir.Version, UpgradeFrom: ir.UpgradeFrom, DowngradeTo: ir.DowngradeTo, Artifacts: map[string]config.Artifact{}}
	for name, a := range ir.Artifacts {
		r.Artifacts[name] = config.Artifact{Path: a.Path, Image: a.Image, SHA256: strings.ToLower(a.SHA256)}
	}
	return r
}

var sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

func (s *Server) postRelease(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var req ImportRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.Version == "":
		return badRequest(`field "version" is required`)
	case !config.IsVersion(req.Version):
		return badRequest(`field "version": %q is not a release version (MAJOR.MINOR.PATCH)`, req.Version)
	case len(req.Artifacts) == 0:
		return badRequest(`field "artifacts" is required: at least one ("*" serves any component)`)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range req.Artifacts {
			if !yield(k) {
				return
			}
		}
	}) {
		a := req.Artifacts[name]
		switch {
		case !sha256RE.MatchString(a.SHA256):
			return badRequest(`artifacts[%q].sha256: must be 64 hex digits (a SHA-256), checked before the release is used`, name)
		case a.Path == "" && a.Image == "":
			return badRequest(`artifacts[%q]: needs a path (a binary) or an image`, name)
		case a.Path != "" && !filepath.IsAbs(a.Path):
			return badRequest(`artifacts[%q].path: %q must be absolute (it is read on the server's machine)`, name, a.Path)
		}
	}
	rel := req.release()

	// The catalog changes only while no upgrade runs: the engine reads it.
	if !s.reserve() {
		return errf(http.StatusConflict, CodeUpgradeInProgress, "an upgrade is being driven: import the release once it has ended")
	}
	defer s.release()
	if cur, ok, err := s.cfg.Store.Current(); err != nil {
		return err
	} else if ok && !cur.State.Terminal() {
		return errf(http.StatusConflict, CodeUpgradeInProgress, "upgrade %s has not ended (%s): import the release once it has", cur.ID, cur.State)
	}
	if old := s.cfg.Cluster.Release(rel.Version); old != nil {
		if sameRelease(*old, rel) {
			writeJSON(w, http.StatusOK, importView(*old))
			return nil
		}
		return errf(http.StatusConflict, CodeReleaseExists, "release %s is already in the catalog with other artifacts or paths; a version names one release", rel.Version)
	}
	// The catalog with the release must still be a valid description.
	// (The defaults a description's release gets, set here: ApplyDefaults
	// on the whole description would write to what others read.)
	rel.Migrations.Deadline = config.Duration(config.DefaultMigrateDeadline)
	rel.Migrations.Interval = config.Duration(config.DefaultMigrateInterval)
	next := *s.cfg.Cluster
	next.Releases = append(slices.Clip(s.cfg.Cluster.Releases), rel)
	if err := next.Validate(); err != nil {
		return errf(http.StatusUnprocessableEntity, CodeInvalidRelease, "the catalog with release %s would not be valid, nothing imported: %s",
			rel.Version, importProblems(err, len(next.Releases)-1))
	}
	for _, name := range slices.Sorted(mapKeys(rel.Artifacts)) {
		a := rel.Artifacts[name]
		if a.Path == "" {
			continue // an image: its substrate pulls and checks it
		}
		sum, err := checksum.File(a.Path)
		if err != nil {
			return errf(http.StatusUnprocessableEntity, CodeChecksumMismatch, "artifacts[%q]: %v: nothing imported", name, err)
		}
		if !strings.EqualFold(sum, a.SHA256) {
			return errf(http.StatusUnprocessableEntity, CodeChecksumMismatch, "artifacts[%q]: %s has sha256 %s, the request says %s: nothing imported", name, a.Path, sum, a.SHA256)
		}
	}
	if err := s.saveImported(rel); err != nil {
		return err
	}
	s.catalogMu.Lock()
	s.cfg.Cluster.Releases = next.Releases
	s.catalogMu.Unlock()
	s.log.Info("server: release imported", "version", rel.Version)
	w.Header().Set("Location", "/v1/releases/"+rel.Version)
	writeJSON(w, http.StatusCreated, importView(rel))
	return nil
}

// importProblems are the validation problems of the catalog with the
// imported release (releases[i]), those of the release named by the
// request's fields.
func importProblems(err error, i int) string {
	var ce *config.Errors
	if !errors.As(err, &ce) {
		return err.Error()
	}
	prefix := fmt.Sprintf("releases[%d]", i)
	var out []string
	for _, p := range ce.Problems {
		if rest, ok := strings.CutPrefix(p.Path, prefix); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			p.File, p.Line, p.Path = "", 0, strings.TrimPrefix(rest, ".")
		}
		out = append(out, p.String())
	}
	return strings.Join(out, "; ")
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func sameRelease(a, b config.Release) bool {
	return a.Version == b.Version && slices.Equal(a.UpgradeFrom, b.UpgradeFrom) && slices.Equal(a.DowngradeTo, b.DowngradeTo) &&
		reflect.DeepEqual(a.Artifacts, b.Artifacts)
}

func (s *Server) importedPath() string {
	return filepath.Join(filepath.Dir(s.cfg.Store.Path()), ImportedFile)
}

// saveImported adds rel to the data directory's imported releases,
// atomically (a new file renamed over the old one).
func (s *Server) saveImported(rel config.Release) error {
	path := s.importedPath()
	var all []ImportRequest
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &all); err != nil {
			return fmt.Errorf("server: %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	all = append(all, importView(rel))
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(b, '\n'))
}

// writeAtomic replaces path with b: a new file (0600) written and
// synced beside it, renamed over it, the directory synced.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, nothing
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// LoadImported adds the releases imported into dataDir (POST
// /v1/releases) to c's catalog; a release the description lists
// already is left as the description says. The merged catalog is
// validated.
func LoadImported(c *config.Cluster, dataDir string) error {
	path := filepath.Join(dataDir, ImportedFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var all []ImportRequest
	if err := json.Unmarshal(b, &all); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	added := false
	for _, ir := range all {
		if c.Release(ir.Version) == nil {
			c.Releases = append(c.Releases, ir.release())
			added = true
		}
	}
	if !added {
		return nil
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("the description with the releases imported in %s: %w", path, err)
	}
	return nil
}
