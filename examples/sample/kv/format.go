package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Release 2.x of the store has a second record format: the value with a
// CRC-32C, which 1.x cannot read. Which format the cluster writes is the
// replicated compat level (the pin): 1 until ferry's finalize moves it
// to 2. Format-2 records live in their own map beside the format-1 ones
// (Glance's expand): while pinned, a 2.x member writes both forms, so
// 1.x members keep reading everything until the pin moves; migrate
// gives the records written before 2.x their format-2 form, and
// contract drops the format-1 records once nothing can need them.
//
// A build knows format 2 when its major version is 2 or more (or is not
// a release version at all, as in tests): the same source plays both
// releases, and a 1.x build behaves as the old code would.

const (
	opSet2     = "set2"     // write a format-2 record (compat 2 only)
	opCompat   = "compat"   // set the compat level (Value: "1" or "2")
	opMigrate  = "migrate"  // give up to Value format-1 records their format-2 form
	opContract = "contract" // drop the format-1 records that have a format-2 one
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeV2 is the format-2 layout: "v2:" CRC-32C in hex ":" value.
func encodeV2(v string) string {
	return fmt.Sprintf("v2:%08x:%s", crc32.Checksum([]byte(v), castagnoli), v)
}

// errChecksum: a format-2 record whose checksum does not match.
var errChecksum = errors.New("format-2 record fails its checksum")

func decodeV2(rec string) (string, error) {
	rest, ok := strings.CutPrefix(rec, "v2:")
	if !ok || len(rest) < 9 || rest[8] != ':' {
		return "", fmt.Errorf("not a format-2 record")
	}
	sum, err := strconv.ParseUint(rest[:8], 16, 32)
	if err != nil {
		return "", fmt.Errorf("not a format-2 record: %w", err)
	}
	v := rest[9:]
	if crc32.Checksum([]byte(v), castagnoli) != uint32(sum) {
		return "", errChecksum
	}
	return v, nil
}

// knowsV2 reports whether a build of this version knows format 2.
func knowsV2(version string) bool {
	major, _, ok := strings.Cut(version, ".")
	if !ok {
		return true // not a release version: the newest code
	}
	n, err := strconv.Atoi(major)
	return err != nil || n >= 2
}

// applyFormat applies the format ops; ok is false for an op it does not
// know, which a 1.x build says of every format-2 op.
func (f *fsm) applyFormat(c command) (result any, ok bool) {
	switch c.Op {
	case opCompat:
		level, err := strconv.Atoi(string(c.Value))
		if err != nil || level < 1 {
			return fmt.Errorf("bad compat level %q", c.Value), true
		}
		f.compat = level
		return nil, true
	}
	if !f.v2 {
		return nil, false
	}
	switch c.Op {
	case opSet2:
		f.data2[c.Key] = encodeV2(string(c.Value))
		return nil, true
	case opMigrate:
		n, _ := strconv.Atoi(string(c.Value))
		todo := f.unmigrated()
		if n > 0 && len(todo) > n {
			todo = todo[:n]
		}
		for _, k := range todo {
			f.data2[k] = encodeV2(f.data[k])
		}
		return migrateResult{Migrated: len(todo), Remaining: len(f.unmigrated())}, true
	case opContract:
		if f.compat < 2 {
			return fmt.Errorf("contract refused: compat level is %d, not 2", f.compat), true
		}
		removed := 0
		for k := range f.data {
			if _, ok := f.data2[k]; ok {
				delete(f.data, k)
				removed++
			}
		}
		return removed, true
	}
	return nil, false
}

type migrateResult struct {
	Migrated  int
	Remaining int
}

// unmigrated lists, in order, the format-1 keys without a format-2
// record. The caller holds the lock.
func (f *fsm) unmigrated() []string {
	var out []string
	for k := range f.data {
		if _, ok := f.data2[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// read returns what a client reading key gets from this member.
func (f *fsm) read(key string) (v string, found bool, err error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.compat >= 2 {
		if !f.v2 {
			return "", false, errTooNew
		}
		if rec, ok := f.data2[key]; ok {
			v, err := decodeV2(rec)
			return v, err == nil, err
		}
	}
	v, ok := f.data[key]
	return v, ok, nil
}

// errTooNew: a 1.x member whose cluster moved to format 2.
var errTooNew = errors.New("cluster format 2 is newer than this release understands")

type formatStatus struct {
	Version string         `json:"version"`
	Compat  int            `json:"compat"`
	Records map[string]int `json:"records"`
}

func (f *fsm) status(version string) formatStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return formatStatus{Version: version, Compat: max(1, f.compat), Records: map[string]int{"v1": len(f.data), "v2": len(f.data2)}}
}

func (s *Server) handleFormat(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.fsm.status(s.cfg.Version))
}

// tooNew answers for a 1.x member that cannot serve format 2.
func (s *Server) tooNew(w http.ResponseWriter) {
	writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: fmt.Sprintf("cluster format 2 is newer than this release (%s) understands", s.cfg.Version)})
}

// handleCompat sets the compat level (the pin) through raft.
func (s *Server) handleCompat(w http.ResponseWriter, r *http.Request) {
	level, err := strconv.Atoi(r.URL.Query().Get("level"))
	if err != nil || level < 1 || level > 2 {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "level must be 1 or 2"})
		return
	}
	if level == 2 && !s.fsm.v2 {
		writeJSON(w, http.StatusConflict, errorBody{Error: "this release does not know format 2"})
		return
	}
	if s.forwardToLeader(w, r) {
		return
	}
	if level == 2 {
		s.fsm.mu.RLock()
		n := len(s.fsm.unmigrated())
		s.fsm.mu.RUnlock()
		if n > 0 {
			writeJSON(w, http.StatusConflict, errorBody{Error: fmt.Sprintf("%d format-1 record(s) not migrated yet: run the migration first", n)})
			return
		}
	}
	if _, ok := s.applyOp(w, r, command{Op: opCompat, Value: []byte(strconv.Itoa(level))}, "compat"); ok {
		writeJSON(w, http.StatusOK, map[string]int{"compat": level})
	}
}

func (s *Server) handleMigrate(w http.ResponseWriter, r *http.Request) {
	if !s.fsm.v2 {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "this release has no migration"})
		return
	}
	batch := 500
	if b := r.URL.Query().Get("batch"); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: "batch must be a positive number"})
			return
		}
		batch = n
	}
	if s.forwardToLeader(w, r) {
		return
	}
	res, ok := s.applyOp(w, r, command{Op: opMigrate, Value: []byte(strconv.Itoa(batch))}, "migrate")
	if !ok {
		return
	}
	m, _ := res.(migrateResult)
	writeJSON(w, http.StatusOK, map[string]any{"done": m.Remaining == 0, "migrated": m.Migrated, "remaining": m.Remaining})
}

func (s *Server) handleContract(w http.ResponseWriter, r *http.Request) {
	if !s.fsm.v2 {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "this release has no contract step"})
		return
	}
	if s.forwardToLeader(w, r) {
		return
	}
	if st := s.fsm.status(s.cfg.Version); st.Compat < 2 {
		writeJSON(w, http.StatusConflict, errorBody{Error: fmt.Sprintf("contract refused: compat level is %d; finalize (compat 2) comes first", st.Compat)})
		return
	}
	res, ok := s.applyOp(w, r, command{Op: opContract}, "contract")
	if !ok {
		return
	}
	n, _ := res.(int)
	writeJSON(w, http.StatusOK, map[string]any{"done": true, "removed": n})
}

// applyOp applies one command through raft on the leader and returns
// the FSM's result; on failure it has answered the request.
func (s *Server) applyOp(w http.ResponseWriter, r *http.Request, c command, what string) (any, bool) {
	b, err := json.Marshal(c)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
		return nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	f := s.raft.Apply(b, 5*time.Second)
	if err := await(ctx, f); err != nil {
		s.raftError(w, what, err)
		return nil, false
	}
	if err, ok := f.Response().(error); ok && err != nil {
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error()})
		return nil, false
	}
	return f.Response(), true
}

// forwardToLeader sends an admin request on to the leader when this
// member is not it, and copies the answer back; it reports whether it
// answered. Ferry's migration calls go to any member.
func (s *Server) forwardToLeader(w http.ResponseWriter, r *http.Request) bool {
	if s.raft.State() == raft.Leader {
		return false
	}
	id, addr := s.leader()
	if id == "" || addr == "" || r.Header.Get("X-Forwarded-By") != "" {
		s.notLeader(w)
		return true
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.RequestURI(), nil)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
		return true
	}
	req.Header.Set("X-Forwarded-By", s.cfg.ID)
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "forward to leader " + id + ": " + err.Error()})
		return true
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, 1<<20))
	return true
}
