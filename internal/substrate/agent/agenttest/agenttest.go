// Package agenttest builds the programs the agent's and the process
// driver's tests run (a member with two versions, a standalone agent)
// and cleans up the processes they leave. It is for tests only.
package agenttest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ferry-upgrade/ferry/internal/trust/checksum"
)

// Artifact is one built member version.
type Artifact struct {
	Version string
	Path    string
	SHA256  string
}

// Programs are the built test programs.
type Programs struct {
	V1, V2 Artifact // the member program as versions 1.0.0 and 2.0.0
	Agent  string   // testdata/agentmain: agent.Serve as a process
	// NextAgent is agentmain linked as the next ferry release
	// (NextRelease), with its sha256: what an agent re-executes itself
	// on in the tests of POST /v1/agent/reexec.
	NextAgent Artifact
}

// NextRelease is the ferry release NextAgent says it is.
const NextRelease = "99.0.0"

func testdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Build builds the test programs into dir. The two member versions
// differ only in the version linked in, so their sha256 differ.
func Build(dir string) (*Programs, error) {
	p := &Programs{
		V1:        Artifact{Version: "1.0.0", Path: filepath.Join(dir, "v1", "member")},
		V2:        Artifact{Version: "2.0.0", Path: filepath.Join(dir, "v2", "member")},
		Agent:     filepath.Join(dir, "agent", "agentmain"),
		NextAgent: Artifact{Version: NextRelease, Path: filepath.Join(dir, "agent-next", "agentmain")},
	}
	jobs := []struct{ pkg, out, ldflags string }{
		{"member", p.V1.Path, "-X main.version=1.0.0"},
		{"member", p.V2.Path, "-X main.version=2.0.0"},
		{"agentmain", p.Agent, ""},
		{"agentmain", p.NextAgent.Path, "-X github.com/ferry-upgrade/ferry/internal/run/buildinfo.release=" + NextRelease},
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = goBuild(filepath.Join(testdata(), j.pkg), j.out, j.ldflags)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, a := range []*Artifact{&p.V1, &p.V2, &p.NextAgent} {
		sum, err := SHA256File(a.Path)
		if err != nil {
			return nil, err
		}
		a.SHA256 = sum
	}
	if p.V1.SHA256 == p.V2.SHA256 {
		return nil, errors.New("agenttest: both member versions have the same sha256")
	}
	return p, nil
}

func goBuild(pkgDir, out, ldflags string) error {
	// go test puts its own GOROOT/bin first in PATH.
	args := []string{"build", "-o", out}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	args = append(args, ".")
	cmd := exec.Command("go", args...)
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkgDir, err, b)
	}
	return nil
}

// SHA256File returns the hex sha256 of a file.
func SHA256File(path string) (string, error) { return checksum.File(path) }

// NewTag returns a random tag; members started with the argument
// TagArg(tag) can be found and killed with KillTagged.
func NewTag() string {
	var b [6]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// TagArg is the member argument that carries a tag.
func TagArg(tag string) string { return "-tag=" + tag }

// KillTagged SIGKILLs every process whose arguments hold an argument
// starting with TagArg(prefix), and returns their pids.
func KillTagged(prefix string) []int {
	pids := Tagged(prefix)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return pids
}

// Tagged returns the pids of live (not zombie) processes whose
// arguments hold an argument starting with TagArg(prefix).
func Tagged(prefix string) []int {
	want := TagArg(prefix)
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if strings.HasPrefix(a, want) {
				if Alive(pid) {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}

// Alive reports whether pid is a live process: it exists and is not
// a zombie (an orphan whose new parent has not reaped it yet).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	st := b[i+2]
	return st != 'Z' && st != 'X'
}

// WaitFor polls cond every 20ms until it is true or d has passed; it
// returns the last message of cond (why it was not yet true) on
// timeout, "" on success.
func WaitFor(d time.Duration, cond func() (bool, string)) string {
	deadline := time.Now().Add(d)
	for {
		ok, why := cond()
		if ok {
			return ""
		}
		if time.Now().After(deadline) {
			if why == "" {
				why = "condition not met"
			}
			return fmt.Sprintf("after %v: %s", d, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// KillUnder SIGKILLs every process whose working directory is dir or
// below it (the members of an agent on dir), and waits until they are
// gone, so that dir can be removed.
func KillUnder(dir string) {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+"/")) {
			continue
		}
		syscall.Kill(pid, syscall.SIGKILL)
		pids = append(pids, pid)
	}
	WaitFor(5*time.Second, func() (bool, string) {
		for _, pid := range pids {
			if Alive(pid) {
				return false, ""
			}
		}
		return true, ""
	})
}

// LockedBuffer collects an agent's log, written by its goroutines while
// a test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
