// Package bundle writes a troubleshooting bundle: one tar.gz with
// everything needed to understand an upgrade after the fact (a failed
// one, a rollback), for a colleague or a bug report, without access to
// the cluster: the description with its secrets redacted, the plan, the
// record and every event, each member's output of its current and
// previous instances, the versions and the health seen now, the impact
// report, the builds of ferry and of its agents, a manifest and a
// summary to read first.
//
// It is written for bad days: whatever cannot be collected (an agent
// that does not answer, a description that no longer loads, a report
// that is too large) is named with the reason in the manifest and the
// summary, and the rest is written anyway. It reads the store only
// (store.OpenReadOnly works), and never reads a token file: the secrets
// it scrubs are the ones its caller already holds in memory.
//
// The layout (under bundle-UPGRADE-ID/) is described in README.md,
// the first file of every bundle (readme.go).
package bundle

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// Store is what a bundle reads of ferry's store: store.Store, opened
// read-only or not.
type Store interface {
	Last() (upgrade.Upgrade, bool, error)
	Get(id string) (upgrade.Upgrade, error)
	Events(upgradeID string, after uint64, limit int) ([]store.Event, error)
}

var _ Store = (*store.Store)(nil)

// Live is the cluster as ferry sees it now: an *engine.Engine (the
// server wraps its own, to take its locks).
type Live interface {
	Members() []driver.Member
	Observe(ctx context.Context) (engine.Snapshot, error)
	RunPreflight(ctx context.Context, to string) engine.Preflight
	MembersView(snap engine.Snapshot, u *upgrade.Upgrade) []engine.MemberView
	VersionsView(snap engine.Snapshot) []engine.ComponentVersions
}

var _ Live = (*engine.Engine)(nil)

// AgentVersioner is a driver whose substrate has agents with a build
// of their own (the process driver).
type AgentVersioner interface {
	AgentVersion(ctx context.Context, host string) (string, error)
}

// SecretHolder is a driver that holds secrets (the tokens it presents
// to agents): a bundle scrubs them from everything it collects.
type SecretHolder interface {
	Secrets() []string
}

// Defaults of a bundle's bounds.
const (
	DefaultTimeout  = time.Minute
	DefaultLogLines = 1000
	DefaultLogBytes = 1 << 20
	// maxReport bounds each file of the impact report copied in.
	maxReport = 64 << 20
	// logWorkers members' outputs are fetched at once.
	logWorkers = 8
)

// Config is what a bundle is made from. Only Store is required: each
// other part missing is named in the bundle as not collected.
type Config struct {
	Store Store
	// ID is the upgrade; "" or "current" for the current one or, when
	// none is current, the last one.
	ID string
	// DataDir is ferry's data directory, where DATA-DIR/reports holds
	// the impact reports.
	DataDir string
	// Description is the description as read now from DescriptionFile,
	// nil when it could not be read (DescriptionErr says why).
	Description     []byte
	DescriptionFile string
	DescriptionErr  error
	// Cluster is the description loaded (its hosts, its substrate); nil
	// when it does not load (LiveErr says why).
	Cluster *config.Cluster
	// Live observes the cluster (views, health, members for their
	// output); nil when it could not be built (LiveErr says why).
	Live    Live
	LiveErr error
	// Driver gives the members' output (driver.Logger) and the agents'
	// builds (AgentVersioner); its secrets (SecretHolder) are scrubbed.
	Driver driver.Driver
	// Secrets are more values never to be written (the server's API
	// token), held by the caller in memory.
	Secrets []string
	// By says who asked for the bundle, and how.
	By string
	// Report is an impact report (JSON) the caller holds in memory (the
	// server's), used when DATA-DIR/reports has none for the upgrade.
	Report []byte
	// Timeout bounds what is asked of the cluster (outputs, builds,
	// views, health): the bundle is written when it passes, with what
	// could not be collected named (default DefaultTimeout).
	Timeout time.Duration
	// LogLines and LogBytes bound each instance's output (defaults
	// DefaultLogLines, DefaultLogBytes; the agent serves at most 10000
	// lines).
	LogLines int
	LogBytes int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// ImportedReleases is the file of DATA-DIR where a server keeps the
// releases imported through its API (server.ImportedFile).
const ImportedReleases = "releases.json"

// ErrNoUpgrade is returned when there is no such upgrade (or none at
// all): there is nothing to bundle.
var ErrNoUpgrade = errors.New("bundle: no such upgrade")

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID reports whether id may name an upgrade: it names files of the
// bundle and of DATA-DIR/reports, so it is a plain file name.
func ValidID(id string) bool { return idRE.MatchString(id) && !strings.Contains(id, "..") }

// Resolve returns the upgrade a bundle is about: id, or for "" and
// "current" the current upgrade or else the last one.
func Resolve(st Store, id string) (upgrade.Upgrade, error) {
	if id == "" || id == "current" {
		u, ok, err := st.Last()
		if err != nil {
			return u, err
		}
		if !ok {
			return u, fmt.Errorf("%w: this data directory has never had an upgrade", ErrNoUpgrade)
		}
		return u, nil
	}
	if !ValidID(id) {
		return upgrade.Upgrade{}, fmt.Errorf("%w: %q is not an upgrade id (letters, digits, '.', '_', '-')", ErrNoUpgrade, id)
	}
	u, err := st.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		return u, fmt.Errorf("%w: %s", ErrNoUpgrade, id)
	}
	return u, err
}

// FileName is a bundle's default file name.
func FileName(id string) string { return "bundle-" + id + ".tar.gz" }

// Manifest says what a bundle holds: manifest.json, its last file.
type Manifest struct {
	// Format is the layout's version (1).
	Format  int       `json:"format"`
	Upgrade string    `json:"upgrade"`
	State   string    `json:"state"`
	Created time.Time `json:"created"`
	By      string    `json:"by"`
	// Ferry is the build that wrote it.
	Ferry buildinfo.Info `json:"ferry"`
	Files []File         `json:"files"`
	// NotCollected names each part that is missing, and why.
	NotCollected []Missing `json:"not_collected,omitempty"`
	// Redacted counts the values of the description replaced, and
	// Scrubbed the texts collected (events, outputs, reports) in which
	// a secret was replaced.
	Redacted int `json:"redacted"`
	Scrubbed int `json:"scrubbed"`
}

// File is one file of a bundle, its size and SHA-256 as written.
type File struct {
	Name   string `json:"name"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
	What   string `json:"what"`
}

// Missing is a part of a bundle that could not be collected.
type Missing struct {
	What string `json:"what"`
	Why  string `json:"why"`
}

// writer puts files into the archive as they are collected, so that a
// bundle's memory is one member's output at a time.
type writer struct {
	tw      *tar.Writer
	dir     string
	modTime time.Time
	man     *Manifest
	scrub   *scrubber
}

func (w *writer) add(name, what string, data []byte) error {
	h := &tar.Header{Name: w.dir + "/" + name, Mode: 0o600, Size: int64(len(data)), ModTime: w.modTime,
		Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := w.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("bundle: %s: %w", name, err)
	}
	if _, err := w.tw.Write(data); err != nil {
		return fmt.Errorf("bundle: %s: %w", name, err)
	}
	sum := sha256.Sum256(data)
	w.man.Files = append(w.man.Files, File{Name: name, Bytes: len(data), SHA256: hex.EncodeToString(sum[:]), What: what})
	return nil
}

func (w *writer) addJSON(name, what string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("bundle: %s: %w", name, err)
	}
	return w.add(name, what, append(b, '\n'))
}

func (w *writer) missing(what string, why error) {
	w.man.NotCollected = append(w.man.NotCollected, Missing{What: what, Why: w.scrub.text(why.Error())})
}

// Write writes the bundle of the upgrade cfg names to out, and returns
// its manifest. Parts that cannot be collected are named in the bundle
// and do not fail it; an error means no bundle (no such upgrade, the
// store unreadable, out failing).
func Write(ctx context.Context, out io.Writer, cfg Config) (*Manifest, error) {
	if cfg.Store == nil {
		return nil, errors.New("bundle: a store is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.LogLines <= 0 {
		cfg.LogLines = DefaultLogLines
	}
	cfg.LogLines = min(cfg.LogLines, 10000)
	if cfg.LogBytes <= 0 {
		cfg.LogBytes = DefaultLogBytes
	}
	u, err := Resolve(cfg.Store, cfg.ID)
	if err != nil {
		return nil, err
	}
	evs, err := cfg.Store.Events(u.ID, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("bundle: the events of %s: %w", u.ID, err)
	}
	now := cfg.Now()
	man := &Manifest{Format: 1, Upgrade: u.ID, State: u.State.String(), Created: now.UTC(), By: cfg.By, Ferry: buildinfo.Read()}

	// The secrets: what the caller and its driver hold, and what the
	// description's redaction finds. Known before anything is written.
	secrets := append([]string(nil), cfg.Secrets...)
	if sh, ok := cfg.Driver.(SecretHolder); ok {
		secrets = append(secrets, sh.Secrets()...)
	}
	var desc []byte
	var reds []Redaction
	descErr := cfg.DescriptionErr
	if cfg.Description != nil {
		var values []string
		desc, reds, values, err = Description(cfg.Description)
		if err != nil {
			descErr = err
		}
		secrets = append(secrets, values...)
	} else if descErr == nil {
		descErr = errors.New("no description was given")
	}
	sc := newScrubber(secrets)
	man.Redacted = len(reds)

	gz := gzip.NewWriter(out)
	tw := tar.NewWriter(gz)
	w := &writer{tw: tw, dir: strings.TrimSuffix(FileName(u.ID), ".tar.gz"), modTime: now, man: man, scrub: sc}
	if err := w.add("README.md", "what is in this bundle, and what was redacted", []byte(readme)); err != nil {
		return nil, err
	}

	// The description.
	digest := DescriptionInfo{File: cfg.DescriptionFile, RecordedSHA256: u.Description, Redacted: reds}
	if cfg.Description != nil {
		sum := sha256.Sum256(cfg.Description)
		digest.SHA256 = hex.EncodeToString(sum[:])
		digest.Same = digest.SHA256 == u.Description
		switch {
		case u.Description == "":
			digest.Note = "the record has no description digest"
		case !digest.Same:
			digest.Note = "the description changed since the upgrade began: this is the file as it is now, not the one the upgrade ran with"
		default:
			digest.Note = "the very description the upgrade began with"
		}
	}
	if desc != nil {
		if err := w.add("description/cluster.yaml", "the cluster description, secrets redacted, comments dropped", desc); err != nil {
			return nil, err
		}
	} else {
		w.missing("the description (description/cluster.yaml)", descErr)
		digest.Note = "not included: " + sc.text(descErr.Error())
	}
	if err := w.addJSON("description/digest.json", "the description's SHA-256 now and as the record has it, and the paths redacted", digest); err != nil {
		return nil, err
	}
	if cfg.DataDir != "" {
		// The releases imported through a server are part of the catalog.
		b, err := safefile.Read(filepath.Join(cfg.DataDir, ImportedReleases), maxReport, safefile.DefaultTimeout)
		switch {
		case err == nil:
			if err := w.add("description/"+ImportedReleases, "the releases imported through the server's API (DATA-DIR/"+ImportedReleases+"), part of the catalog", []byte(sc.text(string(b)))); err != nil {
				return nil, err
			}
		case !errors.Is(err, fs.ErrNotExist):
			w.missing("the imported releases (DATA-DIR/"+ImportedReleases+")", err)
		}
	}

	// The record, its plans and its events, secrets scrubbed.
	rec := u
	sc.value(&rec)
	if err := w.addJSON("upgrade/record.json", "the upgrade's record as stored", rec); err != nil {
		return nil, err
	}
	if err := w.addJSON("upgrade/plan.json", "the plan, and the rollback's if one began", struct {
		Plan     any `json:"plan"`
		Rollback any `json:"rollback,omitempty"`
	}{rec.Plan, rec.Rollback}); err != nil {
		return nil, err
	}
	var lines []byte
	for _, ev := range evs {
		sc.value(&ev)
		b, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		lines = append(append(lines, b...), '\n')
	}
	if err := w.add("upgrade/events.jsonl", fmt.Sprintf("every event of the upgrade (%d), one JSON object a line, hook outputs as recorded", len(evs)), lines); err != nil {
		return nil, err
	}

	// What the cluster says now, bounded by the timeout.
	lctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	failed := failedMembers(u, evs)
	tails, err := collectLogs(lctx, w, cfg, failed)
	if err != nil {
		return nil, err
	}
	replaced, err := collectKept(w, evs)
	if err != nil {
		return nil, err
	}
	if err := collectVersions(lctx, w, cfg); err != nil {
		return nil, err
	}
	if err := collectViews(lctx, w, cfg, u); err != nil {
		return nil, err
	}
	if err := collectReports(w, cfg, u.ID, judged(evs)); err != nil {
		return nil, err
	}

	man.Scrubbed = sc.count()
	summary := writeSummary(u, evs, failed, tails, replaced, man, digest, now)
	if err := w.add("summary.txt", "read this first: state, reason, failed members with their last output, undos owed, refusals", []byte(sc.text(summary))); err != nil {
		return nil, err
	}
	// The manifest lists every file before it; itself last.
	if err := w.addJSON("manifest.json", "what is in this bundle, when, by whom, and what could not be collected", man); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return man, nil
}

// DescriptionInfo is description/digest.json.
type DescriptionInfo struct {
	File string `json:"file,omitempty"`
	// SHA256 is the digest of the file as read now; RecordedSHA256 the
	// one the upgrade began with. Same says whether they match.
	SHA256         string      `json:"sha256,omitempty"`
	RecordedSHA256 string      `json:"recorded_sha256,omitempty"`
	Same           bool        `json:"same"`
	Note           string      `json:"note,omitempty"`
	Redacted       []Redaction `json:"redacted"`
}

// failed is a member whose move failed during the upgrade, from its
// record or, once a rollback reset it, from the events.
type failed struct {
	Name, Component, From, Target string
	// Why is what failed it (its step event, its detail, its exit).
	Why string
	// Output is the crash loop's output event, if any.
	Output string
}

func failedMembers(u upgrade.Upgrade, evs []store.Event) []failed {
	var out []failed
	index := map[string]int{}
	get := func(n string) *failed {
		if i, ok := index[n]; ok {
			return &out[i]
		}
		f := failed{Name: n}
		if m := u.Members[n]; m != nil {
			f.Component, f.From, f.Target = m.Component, m.From, m.Target
		}
		index[n] = len(out)
		out = append(out, f)
		return &out[len(out)-1]
	}
	for _, ev := range evs {
		switch {
		case ev.Member == "":
		case ev.Kind == "step" && strings.Contains(ev.Message, "→ "+string(upgrade.StepFailed)):
			get(ev.Member).Why = ev.Message
		case ev.Kind == "output":
			get(ev.Member).Output = ev.Message
		}
	}
	for _, n := range sortedMembers(u) {
		m := u.Members[n]
		if m.Step == upgrade.StepFailed || m.CrashLoop {
			f := get(n)
			if f.Why == "" {
				f.Why = strings.TrimSpace(m.Detail + " " + m.ExitDetail)
			}
		}
	}
	return out
}

func sortedMembers(u upgrade.Upgrade) []string {
	var ns []string
	for n := range u.Members {
		ns = append(ns, n)
	}
	sortStrings(ns)
	return ns
}

// instance is one instance's output as collected.
type instance struct {
	text string
	err  error
}

// memberLogs are a member's current and previous instances.
type memberLogs struct {
	name              string
	current, previous instance
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// collectLogs fetches each member's output of its current and previous
// instance (a few members at a time, written in order), and returns the
// last lines of the failed members' for the summary. A host whose agent
// did not answer is not asked again for its other members.
func collectLogs(ctx context.Context, w *writer, cfg Config, failed []failed) (map[string]memberLogs, error) {
	tails := map[string]memberLogs{}
	if cfg.Live == nil {
		w.missing("the members' output (members/)", fmt.Errorf("the cluster is not known: %v", orUnknown(cfg.LiveErr)))
		return tails, nil
	}
	lg, ok := cfg.Driver.(driver.Logger)
	if !ok {
		w.missing("the members' output (members/)", fmt.Errorf("the %s driver does not keep its members' output (driver.Logger): read it where the substrate keeps it (kubectl logs --previous)", substrate(cfg)))
		return tails, nil
	}
	isFailed := map[string]bool{}
	for _, f := range failed {
		isFailed[f.Name] = true
	}
	members := cfg.Live.Members()
	var mu sync.Mutex
	down := map[string]error{}       // host → why its agent is not asked again
	unasked := map[string][]string{} // host → its members whose output is missing for it
	var late []string                // members whose output the time limit cut off
	var none []string                // members that have no output the driver reads (nodes)
	var noneWhy error
	fetch := func(m driver.Member, previous bool) instance {
		mu.Lock()
		why := down[m.Host]
		mu.Unlock()
		if why != nil {
			return instance{err: why}
		}
		if err := ctx.Err(); err != nil {
			return instance{err: fmt.Errorf("not asked: the bundle's time limit (%s) passed", cfg.Timeout)}
		}
		s, err := lg.Logs(ctx, m, previous, cfg.LogLines)
		if errors.Is(err, driver.ErrUnreachable) {
			mu.Lock()
			if down[m.Host] == nil {
				down[m.Host] = fmt.Errorf("the agent of host %s did not answer (%w), so none of its members' output could be read", m.Host, err)
			}
			mu.Unlock()
		}
		if len(s) > cfg.LogBytes {
			s = fmt.Sprintf("[... the first %d bytes left out: the bundle keeps the last %d of each instance]\n", len(s)-cfg.LogBytes, cfg.LogBytes) + s[len(s)-cfg.LogBytes:]
		}
		return instance{text: w.scrub.text(s), err: err}
	}
	for start := 0; start < len(members); start += logWorkers {
		chunk := members[start:min(start+logWorkers, len(members))]
		got := make([]memberLogs, len(chunk))
		var wg sync.WaitGroup
		for i, m := range chunk {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = memberLogs{name: m.Name, current: fetch(m, false), previous: fetch(m, true)}
			}()
		}
		wg.Wait()
		for i, ml := range got {
			dir := "members/" + unsafeName.ReplaceAllString(ml.name, "_")
			for _, x := range []struct {
				which, file string
				in          instance
			}{{"current (or last)", "current.log", ml.current}, {"previous", "previous.log", ml.previous}} {
				switch {
				case x.in.err == nil:
					if err := w.add(dir+"/"+x.file, fmt.Sprintf("%s's output of its %s instance, its last %d lines at most", ml.name, x.which, cfg.LogLines), []byte(x.in.text)); err != nil {
						return nil, err
					}
				case isNotFound(x.in.err) && x.file == "previous.log":
					// No instance before the current one: nothing is missing.
				case errors.Is(x.in.err, errors.ErrUnsupported):
					// Said once for all, below.
					if n := len(none); n == 0 || none[n-1] != ml.name {
						none, noneWhy = append(none, ml.name), cmp.Or(noneWhy, x.in.err)
					}
				case ctx.Err() != nil && errors.Is(x.in.err, ctx.Err()) || strings.HasPrefix(x.in.err.Error(), "not asked"):
					// Said once for all, below.
					if n := len(late); n == 0 || late[n-1] != ml.name {
						late = append(late, ml.name)
					}
				case down[chunk[i].Host] != nil:
					// Said once for the host, below.
					if n := len(unasked[chunk[i].Host]); n == 0 || unasked[chunk[i].Host][n-1] != ml.name {
						unasked[chunk[i].Host] = append(unasked[chunk[i].Host], ml.name)
					}
				default:
					w.missing(fmt.Sprintf("%s's output of its %s instance (%s/%s)", ml.name, x.which, dir, x.file), x.in.err)
				}
			}
			if isFailed[ml.name] {
				tails[ml.name] = ml
			}
		}
	}
	if len(none) > 0 {
		w.missing(fmt.Sprintf("the output of %d member(s) (%s)", len(none), strings.Join(none, ", ")),
			fmt.Errorf("the %s driver reads no output of such members; the first said: %w", substrate(cfg), noneWhy))
	}
	if len(late) > 0 {
		w.missing(fmt.Sprintf("the output of %d member(s) (%s)", len(late), strings.Join(late, ", ")),
			fmt.Errorf("the bundle's time limit (%s, --timeout) passed before their agents answered", cfg.Timeout))
	}
	for _, h := range sortedKeys(unasked) {
		w.missing(fmt.Sprintf("the output of %d member(s) of host %s (%s)", len(unasked[h]), h, strings.Join(unasked[h], ", ")), down[h])
	}
	return tails, nil
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sortStrings(ks)
	return ks
}

// isNotFound reports whether a driver said the output does not exist
// (no previous instance): every driver's answer for it is fs.ErrNotExist.
func isNotFound(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// substrate names the description's substrate in messages (the
// default one when the description did not load).
func substrate(cfg Config) string {
	if cfg.Cluster != nil && cfg.Cluster.Substrate != "" {
		return cfg.Cluster.Substrate
	}
	return config.DefaultSubstrate()
}

func orUnknown(err error) string {
	if err == nil {
		return "no reason given"
	}
	return err.Error()
}

// AgentInfo is one host's agent in versions.json.
type AgentInfo struct {
	Host    string `json:"host"`
	Agent   string `json:"agent,omitempty"`
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Versions is versions.json: the builds involved.
type Versions struct {
	Ferry  buildinfo.Info `json:"ferry"`
	Agents []AgentInfo    `json:"agents,omitempty"`
	Note   string         `json:"note,omitempty"`
}

func collectVersions(ctx context.Context, w *writer, cfg Config) error {
	v := Versions{Ferry: buildinfo.Read()}
	av, ok := cfg.Driver.(AgentVersioner)
	switch {
	case cfg.Cluster == nil:
		v.Note = "the agents' builds are not known: the description did not load"
		w.missing("the agents' builds (versions.json)", fmt.Errorf("the description did not load: %v", orUnknown(cfg.LiveErr)))
	case !ok:
		v.Note = fmt.Sprintf("the %s substrate has no ferry agents", substrate(cfg))
	default:
		for _, h := range cfg.Cluster.Hosts {
			a := AgentInfo{Host: h.Name, Agent: h.Agent}
			ver, err := av.AgentVersion(ctx, h.Name)
			switch {
			case err != nil:
				a.Error = w.scrub.text(err.Error())
				w.missing("the build of host "+h.Name+"'s agent", err)
			case ver == "":
				a.Error = "the agent does not say (older than the field)"
			default:
				a.Version = ver
			}
			v.Agents = append(v.Agents, a)
		}
	}
	return w.addJSON("versions.json", "ferry's build and each agent's", v)
}

// View is one of cluster/*.json: a view of the cluster now.
type View struct {
	ObservedAt time.Time `json:"observed_at,omitzero"`
	// Error says what could not be observed: the view is partial (a
	// member of a host that did not answer shows as down).
	Error string `json:"error,omitempty"`
	Data  any    `json:"data"`
}

func collectViews(ctx context.Context, w *writer, cfg Config, u upgrade.Upgrade) error {
	if cfg.Live == nil {
		w.missing("the views of the cluster now (cluster/)", fmt.Errorf("the cluster is not known: %v", orUnknown(cfg.LiveErr)))
		return nil
	}
	if ctx.Err() != nil {
		w.missing("the views of the cluster now (cluster/)", fmt.Errorf("the bundle's time limit (%s) passed first", cfg.Timeout))
		return nil
	}
	snap, err := cfg.Live.Observe(ctx)
	errText := ""
	if err != nil {
		errText = w.scrub.text(err.Error())
		w.missing("a full observation of the cluster (cluster/members.json, cluster/versions.json are partial)", err)
	}
	rec := u
	members := View{ObservedAt: snap.Time.UTC(), Error: errText, Data: cfg.Live.MembersView(snap, &rec)}
	w.scrub.value(&members)
	if err := w.addJSON("cluster/members.json", "each member now: target, running version, status, step ('ferry members')", members); err != nil {
		return err
	}
	if err := w.addJSON("cluster/versions.json", "members per component per running version now ('ferry versions')", View{ObservedAt: snap.Time.UTC(), Error: errText, Data: cfg.Live.VersionsView(snap)}); err != nil {
		return err
	}
	if ctx.Err() != nil {
		w.missing("the health now (cluster/health.json)", fmt.Errorf("the bundle's time limit (%s) passed first", cfg.Timeout))
		return nil
	}
	pf := cfg.Live.RunPreflight(ctx, "")
	health := View{ObservedAt: cfg.Now().UTC(), Data: struct {
		OK     bool           `json:"ok"`
		Checks []engine.Check `json:"checks"`
	}{pf.OK(), pf.Checks}}
	w.scrub.value(&health)
	return w.addJSON("cluster/health.json", "the preflight's checks now ('ferry health')", health)
}

// judged reports whether the upgrade ran with traffic: its batches were
// judged (events of kind impact), so it has an impact report somewhere.
func judged(evs []store.Event) bool {
	return slices.ContainsFunc(evs, func(ev store.Event) bool { return ev.Kind == "impact" })
}

// collectReports adds the upgrade's impact report: the data directory's,
// else the server's. An upgrade that ran with traffic (withTraffic) and
// whose report is in neither is said to lack it, not passed over.
func collectReports(w *writer, cfg Config, id string, withTraffic bool) error {
	found := false
	if cfg.DataDir != "" {
		for _, ext := range []string{".json", ".html", ".samples.csv"} {
			p := filepath.Join(cfg.DataDir, "reports", id+ext)
			b, err := safefile.Read(p, maxReport, safefile.DefaultTimeout)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue
			case err != nil:
				w.missing("the impact report's "+id+ext, err)
				continue
			}
			found = true
			if err := w.add("reports/"+id+ext, "the impact report (DATA-DIR/reports)", []byte(w.scrub.text(string(b)))); err != nil {
				return err
			}
		}
	}
	switch {
	case !found && cfg.Report != nil:
		return w.add("reports/"+id+".json", "the impact report, as the server holds it", []byte(w.scrub.text(string(cfg.Report))))
	case !found && withTraffic:
		w.missing("the impact report (reports/"+id+".json)", fmt.Errorf("the upgrade ran with traffic but its report is not in %s: an upgrade a server drove has it there (GET /v1/upgrade/report, or 'ferry --addr ADDR bundle')",
			filepath.Join(cfg.DataDir, "reports")))
	}
	return nil
}
