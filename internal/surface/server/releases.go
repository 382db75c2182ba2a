package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
	"github.com/ferry-upgrade/ferry/internal/trust/signature"
)

// ImportedFile holds the releases imported through POST /v1/releases,
// in the data directory, so that they outlive the server; they are
// added to the description's catalog at every start (LoadImported).
const ImportedFile = "releases.json"

// maxImported bounds releases.json: thousands of releases fit.
const maxImported = 64 << 20

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
// absolute and name a regular file under one of the server's artifact
// roots (DATA-DIR/artifacts, where uploads land, and each
// --artifact-root): it is read on the server's machine, and its SHA-256
// checked before the release is accepted. A signature is its detached
// signature, a file under an artifact root too, checked after the
// checksum with the description's signing_key (required when the
// description has one: a request cannot name its own key).
type ImportArtifact struct {
	Path      string `json:"path,omitempty"`
	Image     string `json:"image,omitempty"`
	SHA256    string `json:"sha256"`
	Signature string `json:"signature,omitempty"`
}

// importView is rel in the import's form: the answer of POST
// /v1/releases and a record of releases.json.
func importView(rel config.Release) ImportRequest {
	ir := ImportRequest{Version: rel.Version, UpgradeFrom: rel.UpgradeFrom, DowngradeTo: rel.DowngradeTo, Artifacts: map[string]ImportArtifact{}}
	for k, a := range rel.Artifacts {
		ir.Artifacts[k] = ImportArtifact{Path: a.Path, Image: a.Image, SHA256: a.SHA256, Signature: a.Signature}
	}
	return ir
}

// release is the catalog's release of an import, with the defaults a
// description's release gets (set here: ApplyDefaults on the whole
// description would write to what others read), whether it comes from
// a request, the data directory or another server's shared catalog.
func (ir ImportRequest) release() config.Release {
	r := config.Release{Version: ir.Version, UpgradeFrom: ir.UpgradeFrom, DowngradeTo: ir.DowngradeTo, Artifacts: map[string]config.Artifact{}}
	for name, a := range ir.Artifacts {
		r.Artifacts[name] = config.Artifact{Path: a.Path, Image: a.Image, SHA256: strings.ToLower(a.SHA256), Signature: a.Signature}
	}
	r.Migrations.Deadline = config.Duration(config.DefaultMigrateDeadline)
	r.Migrations.Interval = config.Duration(config.DefaultMigrateInterval)
	return r
}

var sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

func (s *Server) postRelease(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var req ImportRequest
	if err := decode(r, &req); err != nil {
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
	for _, name := range slices.Sorted(mapKeys(req.Artifacts)) {
		a := req.Artifacts[name]
		switch {
		case !sha256RE.MatchString(a.SHA256):
			return badRequest(`artifacts[%q].sha256: must be 64 hex digits (a SHA-256), checked before the release is used`, name)
		case a.Path == "" && a.Image == "":
			// The sha256 alone names an upload (PUT /v1/artifacts/{sha256}).
			a.Path = s.uploadPath(a.SHA256)
			if _, err := os.Lstat(a.Path); errors.Is(err, fs.ErrNotExist) {
				return errf(http.StatusUnprocessableEntity, CodeArtifactRefused, `artifacts[%q]: no path or image, and no artifact with sha256 %s was uploaded: PUT /v1/artifacts/%s first, or give a path or an image: nothing imported`,
					name, strings.ToLower(a.SHA256), strings.ToLower(a.SHA256))
			}
			req.Artifacts[name] = a
		case a.Path != "" && !filepath.IsAbs(a.Path):
			return badRequest(`artifacts[%q].path: %q must be absolute (it is read on the server's machine), or left out to name the upload of its sha256`, name, a.Path)
		case a.Signature != "" && !filepath.IsAbs(a.Signature):
			return badRequest(`artifacts[%q].signature: %q must be absolute (it is read on the server's machine)`, name, a.Signature)
		}
	}
	rel := req.release()

	// What can be answered from the catalog is answered before anything
	// is read: an identical import, another release under the version,
	// a catalog the release would make invalid, an upgrade running.
	if done, err := s.checkImport(w, rel); done || err != nil {
		return err
	}

	// The artifacts are hashed holding no lock: an import that takes
	// long, or that its client abandons, blocks no upgrade and no other
	// import. The hashing stops when the client leaves, when the server
	// stops, or at ImportTimeout.
	ctx, cancel := s.requestContext(r, s.cfg.ImportTimeout)
	defer cancel()
	defer s.loadImporting(rel.Version)()
	s.log.Info("server: import of a release: checking its artifacts", "version", rel.Version)
	for _, name := range slices.Sorted(mapKeys(rel.Artifacts)) {
		a := rel.Artifacts[name]
		if a.Path == "" {
			continue // an image: its substrate pulls and checks it
		}
		if err := s.checkArtifact(ctx, name, a); err != nil {
			return err
		}
	}

	// The catalog changes only while no upgrade runs (the engine reads
	// it): the server is reserved for the few milliseconds of the change
	// (a start meanwhile waits for them).
	if !s.reserveImport() {
		return errf(http.StatusConflict, CodeUpgradeInProgress, "an upgrade is being driven: import the release once it has ended")
	}
	defer s.release()
	if done, err := s.checkImport(w, rel); done || err != nil {
		return err // (another import, or an upgrade, came first)
	}
	next := s.withRelease(rel)
	if err := s.saveImported(rel); err != nil {
		return err
	}
	// The swap waits for the requests in flight only (each bounded);
	// none that comes after waits on it.
	if err := s.catalogMu.Lock(s.ctx); err != nil {
		return errf(http.StatusServiceUnavailable, CodeImportAbandoned, "the server stops: release %s is kept in %s and joins the catalog at the next start", rel.Version, ImportedFile)
	}
	s.cfg.Cluster.Releases = next.Releases
	s.catalogMu.Unlock()
	s.log.Info("server: release imported", "version", rel.Version)
	w.Header().Set("Location", "/v1/releases/"+rel.Version)
	writeJSON(w, http.StatusCreated, importView(rel))
	return nil
}

// loadImporting marks version as being imported (its load state
// importing in GET /v1/releases, StarlingX's load-list while the load
// is uploaded and checked) until the returned function is called.
func (s *Server) loadImporting(version string) func() {
	s.loadsMu.Lock()
	if s.loadsImporting == nil {
		s.loadsImporting = map[string]int{}
	}
	s.loadsImporting[version]++
	s.loadsMu.Unlock()
	return func() {
		s.loadsMu.Lock()
		if s.loadsImporting[version]--; s.loadsImporting[version] <= 0 {
			delete(s.loadsImporting, version)
		}
		s.loadsMu.Unlock()
	}
}

// withImporting is rv with a row for each release being imported that
// the catalog does not list yet.
func (s *Server) withImporting(rv []engine.ReleaseView) []engine.ReleaseView {
	s.loadsMu.Lock()
	defer s.loadsMu.Unlock()
	listed := map[string]bool{}
	for _, r := range rv {
		listed[r.Version] = true
	}
	for _, v := range slices.Sorted(mapKeys(s.loadsImporting)) {
		if !listed[v] {
			rv = append(rv, engine.ReleaseView{Version: v, State: "unavailable", Load: engine.LoadImporting, Signed: s.cfg.Cluster.SigningKey})
		}
	}
	return rv
}

// checkImport answers what the catalog and the store say of importing
// rel: done (200 written) when the same release is there, an error
// when it may not be imported now or at all, else nothing.
func (s *Server) checkImport(w http.ResponseWriter, rel config.Release) (done bool, err error) {
	s.catalogMu.RLock()
	defer s.catalogMu.RUnlock()
	if old := s.cfg.Cluster.Release(rel.Version); old != nil {
		if sameRelease(*old, rel) {
			writeJSON(w, http.StatusOK, importView(*old))
			return true, nil
		}
		return false, errf(http.StatusConflict, CodeReleaseExists, "release %s is already in the catalog with other artifacts or paths; a version names one release", rel.Version)
	}
	if cur, ok, err := s.cfg.Store.Current(); err != nil {
		return false, err
	} else if ok && !cur.State.Terminal() {
		return false, errf(http.StatusConflict, CodeUpgradeInProgress, "upgrade %s has not ended (%s): import the release once it has", cur.ID, cur.State)
	}
	next := s.withRelease(rel)
	if err := next.Validate(); err != nil {
		return false, errf(http.StatusUnprocessableEntity, CodeInvalidRelease, "the catalog with release %s would not be valid, nothing imported: %s",
			rel.Version, importProblems(err, len(next.Releases)-1))
	}
	return false, nil
}

// withRelease is the description with rel added to its catalog (a
// copy: the catalog itself changes only under catalogMu).
func (s *Server) withRelease(rel config.Release) config.Cluster {
	next := *s.cfg.Cluster
	next.Releases = append(slices.Clip(s.cfg.Cluster.Releases), rel)
	return next
}

// checkArtifact opens the artifact a of an import (a regular file under
// an artifact root, at most MaxArtifactSize bytes) and checks its
// SHA-256, then its signature when it has one (StarlingX's load-import
// with its .sig), both in one read. A mismatch says that the sums
// differ, not what the file's is: the API must not tell what any file
// hashes to (the server's log has it).
func (s *Server) checkArtifact(ctx context.Context, name string, a config.Artifact) error {
	v, err := s.signatureVerifier(name, a)
	if err != nil {
		return err
	}
	f, err := s.openArtifact(name, a.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	var tee []io.Writer
	if v != nil {
		tee = append(tee, v)
	}
	sum, _, err := checksum.Reader(ctx, f, s.cfg.MaxArtifactSize, tee...)
	switch {
	case err == nil:
	case errors.Is(err, checksum.ErrTooLarge):
		return errf(http.StatusUnprocessableEntity, CodeArtifactRefused, "artifacts[%q]: %s grew past the %s allowed (--max-artifact-size) while it was read: nothing imported",
			name, a.Path, safefile.Size(s.cfg.MaxArtifactSize))
	case errors.Is(err, context.DeadlineExceeded):
		return errf(http.StatusUnprocessableEntity, CodeArtifactRefused, "artifacts[%q]: checking %s took longer than %s (--import-timeout): nothing imported",
			name, a.Path, s.cfg.ImportTimeout)
	case ctx.Err() != nil:
		s.log.Info("server: import abandoned (its client left, or the server stops)", "artifact", name, "path", a.Path)
		return errf(http.StatusServiceUnavailable, CodeImportAbandoned, "the import was abandoned before its artifacts were checked: nothing imported")
	default:
		return errf(http.StatusUnprocessableEntity, CodeArtifactRefused, "artifacts[%q]: %s could not be read: %v: nothing imported", name, a.Path, err)
	}
	if !strings.EqualFold(sum, a.SHA256) {
		s.log.Warn("server: import refused: an artifact's sha256 differs from the request's", "artifact", name, "path", a.Path, "want", a.SHA256, "got", sum)
		return errf(http.StatusUnprocessableEntity, CodeChecksumMismatch, "artifacts[%q]: the sha256 of %s differs from the request's %s: nothing imported",
			name, a.Path, a.SHA256)
	}
	if v != nil {
		if err := v.Verify(); err != nil {
			s.log.Warn("server: import refused: an artifact's signature does not verify", "artifact", name, "path", a.Path, "signature", a.Signature, "key", s.signingKey(), "err", err)
			return errf(http.StatusUnprocessableEntity, CodeSignatureMismatch, "artifacts[%q]: %s: signature %s, key %s: %v: nothing imported",
				name, a.Path, a.Signature, s.signingKey(), err)
		}
	}
	return nil
}

// signingKey is the public key imports are checked against: the
// description's (an imported release names none of its own).
func (s *Server) signingKey() string { return s.cfg.Cluster.ResolvePath(s.cfg.Cluster.SigningKey) }

// signatureVerifier reads the key and artifact a's signature (a file
// under an artifact root, opened as an artifact is) and returns the
// verifier its bytes go through; nil when a has no signature (the
// catalog's validation has said whether it needs one).
func (s *Server) signatureVerifier(name string, a config.Artifact) (*signature.Verifier, error) {
	if a.Signature == "" || s.cfg.Cluster.SigningKey == "" {
		return nil, nil
	}
	refuse := func(format string, args ...any) error {
		return errf(http.StatusUnprocessableEntity, CodeSignatureMismatch, "artifacts[%q]: %s: nothing imported", name, fmt.Sprintf(format, args...))
	}
	key, err := signature.ReadPublicKey(s.signingKey())
	if err != nil {
		return nil, refuse("the description's signing_key cannot be used: %v", err)
	}
	f, err := s.openArtifact(name, a.Signature)
	if err != nil {
		return nil, err
	}
	b, err := safefile.ReadOpened(f, a.Signature, signature.MaxFile, safefile.DefaultTimeout)
	if err != nil {
		return nil, refuse("%v", err)
	}
	sig, err := signature.ParseSignature(b)
	if err != nil {
		return nil, refuse("signature %s: %v", a.Signature, err)
	}
	v, err := signature.NewVerifier(key, sig)
	if err != nil {
		return nil, refuse("%s: signature %s, key %s: %v", a.Path, a.Signature, s.signingKey(), err)
	}
	return v, nil
}

// openArtifact opens the file at path for an import if it is a regular
// file, under one of the server's artifact roots once symbolic links
// are resolved, of at most MaxArtifactSize bytes. A path that is not
// under a root as written is refused before the filesystem is asked
// anything, so that the answers say nothing of files elsewhere.
func (s *Server) openArtifact(name, path string) (*os.File, error) {
	refuse := func(format string, args ...any) error {
		return errf(http.StatusUnprocessableEntity, CodeArtifactRefused, "artifacts[%q]: %s: nothing imported",
			name, fmt.Sprintf(format, args...))
	}
	outside := func() error {
		return refuse("%s is not under an artifact root of this server (%s); upload the artifact with PUT /v1/artifacts/{sha256}, "+
			"or start the server with --artifact-root naming its directory", path, strings.Join(s.rootNames(), ", "))
	}
	path = filepath.Clean(path)
	if _, _, ok := s.underRoot(path); !ok {
		return nil, outside()
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, refuse("%s cannot be opened: %v", path, unwrapPath(err))
	}
	root, rel, ok := s.underRoot(resolved)
	if !ok {
		return nil, refuse("%s leads to %s, which is not under an artifact root of this server (%s)", path, resolved, strings.Join(s.rootNames(), ", "))
	}
	// Opened through os.Root: a link swapped in since it was resolved
	// cannot lead out of the root either.
	dir, err := os.OpenRoot(root)
	if err != nil {
		return nil, refuse("artifact root %s cannot be opened: %v", root, unwrapPath(err))
	}
	defer dir.Close()
	f, fi, err := safefile.OpenIn(dir, rel, path)
	if err != nil {
		var se *safefile.Error
		if errors.As(err, &se) {
			return nil, refuse("%s", se.Error())
		}
		return nil, refuse("%s cannot be opened: %v", path, unwrapPath(err))
	}
	if fi.Size() > s.cfg.MaxArtifactSize {
		f.Close()
		return nil, refuse("%s is %d bytes, more than the %s allowed (--max-artifact-size)", path, fi.Size(), safefile.Size(s.cfg.MaxArtifactSize))
	}
	return f, nil
}

// unwrapPath is err without the *fs.PathError's operation and path,
// which the messages give themselves.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// underRoot finds the artifact root that holds path (absolute, clean),
// and path relative to it.
func (s *Server) underRoot(path string) (root, rel string, ok bool) {
	for _, r := range s.roots {
		for _, dir := range []string{r.resolved, r.given} {
			if rel, err := filepath.Rel(dir, path); err == nil && rel != "." && filepath.IsLocal(rel) {
				return r.resolved, rel, true
			}
		}
	}
	return "", "", false
}

func (s *Server) rootNames() []string {
	var out []string
	for _, r := range s.roots {
		out = append(out, r.given)
	}
	return out
}

// artifactRoot is a directory imports may read artifacts from, as the
// operator gave it and with its symbolic links resolved.
type artifactRoot struct{ given, resolved string }

// artifactRoots checks the configured roots and puts the data
// directory's artifact store (created if missing) first.
func artifactRoots(store string, given []string) ([]artifactRoot, error) {
	if err := os.MkdirAll(store, 0o700); err != nil {
		return nil, fmt.Errorf("server: the artifact store %s: %w", store, err)
	}
	var out []artifactRoot
	for i, dir := range append([]string{store}, given...) {
		flag := "--artifact-root"
		if i == 0 {
			flag = "the artifact store"
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("server: %s %s: %w", flag, dir, err)
		}
		resolved, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("server: %s %s: %w", flag, dir, err)
		}
		if fi, err := os.Stat(resolved); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("server: %s %s is not a directory", flag, dir)
		}
		out = append(out, artifactRoot{given: filepath.Clean(abs), resolved: resolved})
	}
	return out, nil
}

// requestContext is r's context, also ended when the server stops and
// after limit.
func (s *Server) requestContext(r *http.Request, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), limit)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// uploadPath is where the upload of the artifact with sum is kept:
// absolute, under the artifact store (the first root, made absolute
// when the data directory was given relative), as an import takes it.
func (s *Server) uploadPath(sum string) string {
	return filepath.Join(s.roots[0].given, strings.ToLower(sum))
}

// ArtifactUpload answers PUT /v1/artifacts/{sha256}: the artifact as
// kept, and the absolute path an import names it by (or it names it by
// its sha256 alone).
type ArtifactUpload struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Path   string `json:"path"`
}

// ArtifactsDir is the artifact store's directory in the data directory:
// uploads land there, named by their SHA-256, and imports may name them.
const ArtifactsDir = "artifacts"

// putArtifact receives an artifact in the request's body, streamed to
// the artifact store while it is hashed: at most MaxArtifactSize bytes,
// within ImportTimeout, stopped when the client leaves or the server
// stops. Only a body whose SHA-256 is the path's is kept.
func (s *Server) putArtifact(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	want := strings.ToLower(r.PathValue("sha256"))
	if !sha256RE.MatchString(want) {
		return badRequest("%q is not a SHA-256 (64 hex digits): PUT /v1/artifacts/{sha256} names the artifact by its sum", r.PathValue("sha256"))
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/octet-stream" {
			return errf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type %q: an artifact is sent as application/octet-stream", ct)
		}
	}
	max := s.cfg.MaxArtifactSize
	tooLarge := func() error {
		return errf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the artifact is larger than the %s this server accepts (--max-artifact-size): nothing kept", safefile.Size(max))
	}
	if r.ContentLength > max {
		return tooLarge()
	}
	ctx, cancel := s.requestContext(r, s.cfg.ImportTimeout)
	defer cancel()
	// The server's ReadTimeout is for small bodies; this one may take
	// up to ImportTimeout, and no longer than the context.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.ImportTimeout))
	stop := context.AfterFunc(ctx, func() { _ = rc.SetReadDeadline(time.Now()) })
	defer stop()

	dir := s.roots[0].given
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return err
	}
	s.log.Info("server: upload of an artifact: receiving it", "sha256", want, "content_length", r.ContentLength)
	defer os.Remove(tmp.Name()) // after the rename, nothing
	sum, n, err := checksum.Reader(ctx, http.MaxBytesReader(w, r.Body, max), 0, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &mbe):
		return tooLarge()
	case ctx.Err() != nil:
		s.log.Info("server: upload abandoned (its client left, the server stops, or --import-timeout passed)", "sha256", want, "received", n)
		return errf(http.StatusRequestTimeout, CodeImportAbandoned, "the upload did not complete within %s (--import-timeout), or was abandoned: nothing kept", s.cfg.ImportTimeout)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errf(http.StatusRequestTimeout, CodeImportAbandoned, "the upload did not complete within %s (--import-timeout): nothing kept", s.cfg.ImportTimeout)
	default:
		return badRequest("the upload could not be read: %v: nothing kept", err)
	}
	if sum != want {
		s.log.Warn("server: upload refused: its sha256 differs from the path's", "want", want, "got", sum, "size", n)
		return errf(http.StatusUnprocessableEntity, CodeChecksumMismatch, "the body's sha256 differs from %s, the one in the path: nothing kept", want)
	}
	dst := s.uploadPath(want)
	status := http.StatusCreated
	if fi, err := os.Lstat(dst); err == nil && fi.Mode().IsRegular() && fi.Size() == n {
		status = http.StatusOK // the same bytes (same sum) are there
	} else if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	} else if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	s.log.Info("server: artifact uploaded", "sha256", want, "size", n)
	writeJSON(w, status, ArtifactUpload{SHA256: want, Size: n, Path: dst})
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

// importedWhere says where the imported releases are kept, for errors.
func (s *Server) importedWhere() string {
	if _, ok := s.cfg.Store.(CatalogKeeper); ok {
		return "the shared store's catalog (" + ImportedFile + ")"
	}
	return filepath.Join(s.cfg.DataDir, ImportedFile)
}

// readImported reads the imported releases as kept: in the shared
// store when it keeps the catalog, else in the data directory; nil
// when none was imported.
func (s *Server) readImported() ([]byte, error) {
	if k, ok := s.cfg.Store.(CatalogKeeper); ok {
		return k.ReadCatalog(ImportedFile)
	}
	return readImportedFile(filepath.Join(s.cfg.DataDir, ImportedFile))
}

// readImportedFile reads a data directory's imported releases; nil
// when there is no file.
func readImportedFile(path string) ([]byte, error) {
	b, err := safefile.Read(path, maxImported, safefile.DefaultTimeout)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// saveImported adds rel to the imported releases: in the shared store,
// or atomically in the data directory (a new file renamed over the old
// one).
func (s *Server) saveImported(rel config.Release) error {
	var all []ImportRequest
	if b, err := s.readImported(); err != nil {
		return err
	} else if b != nil {
		if err := json.Unmarshal(b, &all); err != nil {
			return fmt.Errorf("server: %s: %w", s.importedWhere(), err)
		}
	}
	all = append(all, importView(rel))
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if k, ok := s.cfg.Store.(CatalogKeeper); ok {
		return k.WriteCatalog(ImportedFile, append(b, '\n'))
	}
	return safefile.WriteFileAtomic(filepath.Join(s.cfg.DataDir, ImportedFile), 0o600, append(b, '\n'))
}

// LoadImported adds the releases imported into dataDir (POST
// /v1/releases) to c's catalog; a release the description lists
// already is left as the description says. The merged catalog is
// validated.
func LoadImported(c *config.Cluster, dataDir string) error {
	path := filepath.Join(dataDir, ImportedFile)
	b, err := readImportedFile(path)
	if err != nil {
		return err
	}
	return addImported(c, path, b)
}

// addImported adds the imported releases b, read from where, to c's
// catalog (LoadImported).
func addImported(c *config.Cluster, where string, b []byte) error {
	if b == nil {
		return nil
	}
	var all []ImportRequest
	if err := json.Unmarshal(b, &all); err != nil {
		return fmt.Errorf("%s: %w", where, err)
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
		return fmt.Errorf("the description with the releases imported in %s: %w", where, err)
	}
	return nil
}
