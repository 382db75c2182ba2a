package agent

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/substrate/agent/wire"
	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// The artifact store is the agent's catalog: the only programs it runs.
// Each is DIR/artifacts/<sha256>/<name>, put there by an upload
// (PUT /v1/artifacts/{sha256}) whose bytes had that sum, and hashed
// again before every start. A member's spec names its artifact by the
// sum alone: the agent reads no other file of its host to run it.
const (
	// DefaultMaxArtifactSize bounds an upload (Config.MaxArtifactSize).
	DefaultMaxArtifactSize = 1 << 30
	// defaultArtifactName names an upload that gives no name.
	defaultArtifactName = "artifact"
)

// Artifact is what the agent answers for an artifact of its store.
type Artifact struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Path is the agent's copy, DIR/artifacts/<sha256>/<name>.
	Path string `json:"path"`
}

func (s *Server) artifactsDir() string { return filepath.Join(s.dir, "artifacts") }

// storedArtifact returns the store's copy of the artifact with sum:
// the first regular file (by name) of DIR/artifacts/<sum>/ that is not
// a temporary one. It does not hash it.
func (s *Server) storedArtifact(sum string) (Artifact, bool) {
	dir := filepath.Join(s.artifactsDir(), sum)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Artifact{}, false
	}
	for _, e := range ents { // sorted by name
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		return Artifact{SHA256: sum, Size: fi.Size(), Path: filepath.Join(dir, e.Name())}, true
	}
	return Artifact{}, false
}

// inStore reports whether path is a file of the store filed under sum:
// DIR/artifacts/<sum>/<name>. Every start checks it, restarts and
// re-adoptions from a state file too.
func (s *Server) inStore(path, sum string) bool {
	return validSHA256(sum) && filepath.Dir(filepath.Clean(path)) == filepath.Join(s.artifactsDir(), sum)
}

func artifactUnknown(sum, why string) error {
	return &apiError{http.StatusForbidden, wire.CodeArtifactUnknown,
		fmt.Sprintf("artifact sha256 %s %s: this agent runs only artifacts of its own store; upload it first (PUT /v1/artifacts/%s; ferry's process driver does so itself), then name it by its sha256", sum, why, sum)}
}

// prepareArtifact returns the store's copy of the artifact of spec,
// hashed again now: a copy whose bytes no longer have its sum (a disk
// fault, someone's hand) is removed and refused, so that an upload
// replaces it.
func (s *Server) prepareArtifact(spec wire.MemberSpec) (string, error) {
	a, ok := s.storedArtifact(spec.SHA256)
	if !ok {
		return "", artifactUnknown(spec.SHA256, "is not in this agent's store")
	}
	sum, err := hashFile(a.Path)
	if err != nil {
		return "", fmt.Errorf("artifact %s: %w", a.Path, err)
	}
	if sum != spec.SHA256 {
		s.log.Error("artifact in the store has another sha256; removed", "path", a.Path, "sha256", sum)
		os.Remove(a.Path)
		os.Remove(filepath.Dir(a.Path)) // only if empty
		return "", artifactUnknown(spec.SHA256, "had another sum in this agent's store (its copy "+a.Path+" was removed)")
	}
	return a.Path, nil
}

func (s *Server) handleListArtifacts(w http.ResponseWriter, r *http.Request) {
	ents, err := os.ReadDir(s.artifactsDir())
	if err != nil {
		writeError(w, err)
		return
	}
	out := []Artifact{}
	for _, e := range ents {
		if !e.IsDir() || !validSHA256(e.Name()) {
			continue
		}
		if a, ok := s.storedArtifact(e.Name()); ok {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Artifact) int { return strings.Compare(a.SHA256, b.SHA256) })
	writeJSON(w, http.StatusOK, out)
}

// pathSum reads the {sha256} of the path, in lower case.
func pathSum(r *http.Request) (string, error) {
	sum := strings.ToLower(r.PathValue("sha256"))
	if !validSHA256(sum) {
		return "", badRequest("%q is not a sha256 (64 hex digits): /v1/artifacts/{sha256} names an artifact by its sum", truncate(r.PathValue("sha256"), 80))
	}
	return sum, nil
}

// handleGetArtifact answers GET (and HEAD) /v1/artifacts/{sha256}:
// 200 with the artifact if the store has it, else 404.
func (s *Server) handleGetArtifact(w http.ResponseWriter, r *http.Request) {
	sum, err := pathSum(r)
	if err != nil {
		writeError(w, err)
		return
	}
	a, ok := s.storedArtifact(sum)
	if !ok {
		writeError(w, &apiError{http.StatusNotFound, wire.CodeNotFound,
			fmt.Sprintf("artifact sha256 %s is not in this agent's store: upload it with PUT /v1/artifacts/%s", sum, sum)})
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// handlePutArtifact receives an artifact (PUT /v1/artifacts/{sha256},
// application/octet-stream, ?name= its file name), streamed to a
// temporary file of the store while it is hashed: at most
// MaxArtifactSize bytes, within the upload timeout, stopped when the
// client leaves or the agent closes. Only bytes with the path's sum
// are kept, as DIR/artifacts/<sha256>/<name> (0755): 201, or 200 when
// the store had them already.
func (s *Server) handlePutArtifact(w http.ResponseWriter, r *http.Request) {
	status, a, err := s.putArtifact(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, a)
}

func (s *Server) putArtifact(w http.ResponseWriter, r *http.Request) (int, Artifact, error) {
	want, err := pathSum(r)
	if err != nil {
		return 0, Artifact{}, err
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		name = defaultArtifactName
	} else if !wire.ArtifactNameRE.MatchString(name) {
		return 0, Artifact{}, badRequest("name=%q: want a plain file name, %s", truncate(name, 80), wire.ArtifactNameRE)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/octet-stream" {
			return 0, Artifact{}, badRequest("Content-Type %q: an artifact is sent as application/octet-stream", truncate(ct, 80))
		}
	}
	tooLarge := &apiError{http.StatusRequestEntityTooLarge, wire.CodeTooLarge,
		fmt.Sprintf("the artifact is larger than the %s this agent accepts (--max-artifact-size): nothing kept", safefile.Size(s.maxArtifact))}
	if r.ContentLength > s.maxArtifact {
		return 0, Artifact{}, tooLarge
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.uploadTimeout)
	defer cancel()
	stopOnClose := context.AfterFunc(s.ctx, cancel)
	defer stopOnClose()
	// The server's ReadTimeout is for small bodies; this one may take
	// up to the upload timeout, and no longer than the context.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.uploadTimeout))
	stopDeadline := context.AfterFunc(ctx, func() { _ = rc.SetReadDeadline(time.Now()) })
	defer stopDeadline()

	tmp, err := os.CreateTemp(s.artifactsDir(), ".upload-*")
	if err != nil {
		return 0, Artifact{}, err
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing
	sum, n, err := checksum.Reader(ctx, http.MaxBytesReader(w, r.Body, s.maxArtifact), 0, tmp)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
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
		return 0, Artifact{}, tooLarge
	case ctx.Err() != nil, errors.Is(err, os.ErrDeadlineExceeded):
		s.log.Info("artifact upload abandoned (its client left, the agent stops, or the upload timeout passed)", "sha256", want, "received", n)
		return 0, Artifact{}, &apiError{http.StatusRequestTimeout, wire.CodeUploadAbandoned,
			fmt.Sprintf("the upload did not complete within %s, or was abandoned: nothing kept", s.uploadTimeout)}
	default:
		return 0, Artifact{}, badRequest("the upload could not be read: %v: nothing kept", err)
	}
	if sum != want {
		// The caller's own bytes: their sum tells it nothing it could
		// not compute itself.
		return 0, Artifact{}, &apiError{http.StatusUnprocessableEntity, wire.CodeChecksumMismatch,
			fmt.Sprintf("the uploaded artifact has sha256 %s, not %s (the one in the path): nothing kept; check the release's sha256 and its file", sum, want)}
	}

	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	if a, ok := s.storedArtifact(want); ok {
		if got, err := hashFile(a.Path); err == nil && got == want {
			return http.StatusOK, a, nil // the same bytes are there
		}
		s.log.Error("artifact in the store had another sha256; replaced by the upload", "path", a.Path)
		os.Remove(a.Path)
	}
	dir := filepath.Join(s.artifactsDir(), want)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, Artifact{}, err
	}
	dst := filepath.Join(dir, name)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return 0, Artifact{}, err
	}
	syncDir(dir)
	syncDir(s.artifactsDir())
	s.log.Info("artifact uploaded", "sha256", want, "size", n, "path", dst)
	return http.StatusCreated, Artifact{SHA256: want, Size: n, Path: dst}, nil
}

// removeUploadLeftovers removes the temporary files of uploads that an
// agent before this one did not finish.
func (s *Server) removeUploadLeftovers() {
	ms, _ := filepath.Glob(filepath.Join(s.artifactsDir(), ".upload-*"))
	for _, m := range ms {
		if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() {
			os.Remove(m)
		}
	}
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// checkStored refuses to run path unless it is the store's file for
// sum (see inStore): the last check before any exec.
func (s *Server) checkStored(path, sum string) error {
	if s.inStore(path, sum) {
		return nil
	}
	return &apiError{http.StatusForbidden, wire.CodeArtifactUnknown,
		fmt.Sprintf("%s is not a file of this agent's artifact store (%s/%s/): not run; start the member again through ferry, which uploads its artifact", path, s.artifactsDir(), sum)}
}
