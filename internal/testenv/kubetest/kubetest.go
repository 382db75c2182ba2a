// Package kubetest runs tests against a real Kubernetes control plane on
// loopback: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
// built from their Go modules, with kwok standing in for the kubelets of fake
// nodes, so that pods are scheduled and become Running and Ready.
//
// The binaries are built once into a cache by scripts/kube-testenv.sh (the
// first build takes about ten minutes on two cores); tests are skipped unless
// FERRY_KUBE=1, so that a plain `go test ./...` builds no Kubernetes.
//
// The package uses only the standard library: it drives the script and
// kubectl as subprocesses with argument lists.
package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvVar must be "1" for Start to run; otherwise the test is skipped.
const EnvVar = "FERRY_KUBE"

// NodeAnnotation marks the Nodes that kwok manages (the script starts kwok
// with --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake).
const NodeAnnotation = "kwok.x-k8s.io/node"

// Options says what Start sets up beyond the control plane.
type Options struct {
	// Nodes is the number of kwok fake nodes to create, named kwok-node-0, ...
	// Start returns once they are all Ready.
	Nodes int
	// Scale runs the control plane for a thousand nodes: higher limits
	// on the API server's requests in flight. (No control plane here runs
	// the node lifecycle controller: kwok's nodes would be marked NotReady,
	// and their pods with them, whenever the machine is slow.)
	Scale bool
}

// Env is a running control plane.
type Env struct {
	Kubeconfig string // admin kubeconfig (token auth, system:masters)
	BinDir     string // kubectl, kube-apiserver, ..., etcd, kwok
	Dir        string // the control plane's directory: logs, certs, etcd data

	script string
}

// Start builds (if needed) and starts a control plane in t.TempDir(),
// creates opts.Nodes fake nodes and waits until they are Ready. The control
// plane is stopped when the test ends. It skips the test unless FERRY_KUBE=1.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	if os.Getenv(EnvVar) != "1" {
		t.Skipf("%s is not 1: skipping a test that needs a real Kubernetes control plane "+
			"(set %s=1; the first run builds Kubernetes into a cache, ~10 min: see tools/kubeenv/README.md)",
			EnvVar, EnvVar)
	}
	script, err := FindScript()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	bin, err := build(t, script)
	if err != nil {
		t.Fatalf("kubetest: build: %v", err)
	}

	dir := t.TempDir()
	e := &Env{Kubeconfig: filepath.Join(dir, "kubeconfig"), BinDir: bin, Dir: dir, script: script}
	began := time.Now()
	cmd := exec.Command("bash", script, "start", dir)
	// The script's watchdog stops the control plane if this process dies
	// without running its cleanups (a test timeout, a kill).
	cmd.Env = append(os.Environ(), "FERRY_KUBE_WATCH_PID="+strconv.Itoa(os.Getpid()))
	if opts.Scale {
		cmd.Env = append(cmd.Env, "FERRY_KUBE_SCALE=1")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Registered before the start so that a half-started plane is stopped too;
	// it runs before t.TempDir's removal (cleanups run last-in first-out).
	t.Cleanup(e.stop(t))
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubetest: start: %v\n%s", err, out.String())
	}
	t.Logf("kubetest: control plane ready in %s (%s)", time.Since(began).Round(time.Millisecond), dir)

	if opts.Nodes > 0 {
		began = time.Now()
		if err := e.CreateNodes(0, opts.Nodes); err != nil {
			t.Fatalf("kubetest: %v", err)
		}
		t.Logf("kubetest: %d nodes Ready in %s", opts.Nodes, time.Since(began).Round(time.Millisecond))
	}
	return e
}

// Users are the operators the control plane authenticates by token,
// beside its admin: users in group ferry-operators, with no rights but
// what a test grants them.
var Users = []string{"alice", "bob"}

// KubeconfigOf is the kubeconfig of user (one of Users).
func (e *Env) KubeconfigOf(user string) string {
	return filepath.Join(e.Dir, "kubeconfig-"+user)
}

// Kubectl runs kubectl against the environment and returns its standard
// output; on failure the error carries its standard error.
func (e *Env) Kubectl(args ...string) (string, error) {
	return e.kubectl(nil, args...)
}

// KubectlAs is Kubectl as user (one of Users), authenticated by its own
// token: the API server's request.userInfo.username is user.
func (e *Env) KubectlAs(user string, stdin string, args ...string) (string, error) {
	var in *strings.Reader
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	return e.kubectlWith(e.KubeconfigOf(user), in, args...)
}

// Apply runs `kubectl apply -f -` with manifest (YAML or JSON) on its input.
func (e *Env) Apply(manifest string) error {
	_, err := e.kubectl(strings.NewReader(manifest), "apply", "-f", "-")
	return err
}

func (e *Env) kubectl(stdin *strings.Reader, args ...string) (string, error) {
	return e.kubectlWith(e.Kubeconfig, stdin, args...)
}

func (e *Env) kubectlWith(kubeconfig string, stdin *strings.Reader, args ...string) (string, error) {
	full := append([]string{"--kubeconfig=" + kubeconfig}, args...)
	cmd := exec.Command(filepath.Join(e.BinDir, "kubectl"), full...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// CreateNodes creates the kwok fake nodes kwok-node-<first> .. kwok-node-<first+n-1>
// and waits until they are Ready.
func (e *Env) CreateNodes(first, n int) error {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		name := "kwok-node-" + strconv.Itoa(i)
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Node
metadata:
  name: %s
  annotations:
    %s: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: %s
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
`, name, NodeAnnotation, name)
	}
	if err := e.Apply(b.String()); err != nil {
		return fmt.Errorf("creating %d nodes: %w", n, err)
	}
	// One listing per poll: 'kubectl wait' on a thousand nodes waits on
	// them one by one.
	want := map[string]bool{}
	for i := first; i < first+n; i++ {
		want["kwok-node-"+strconv.Itoa(i)] = true
	}
	return e.WaitUntil(3*time.Minute, fmt.Sprintf("%d nodes Ready", n), func() (bool, string, error) {
		out, err := e.Kubectl("get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return false, "", err
		}
		ready := 0
		for _, line := range strings.Split(out, "\n") {
			name, status, _ := strings.Cut(line, " ")
			if want[name] && status == "True" {
				ready++
			}
		}
		return ready == n, fmt.Sprintf("%d of %d Ready", ready, n), nil
	})
}

// WaitUntil polls cond every 200 ms until it reports true, returns an error,
// or timeout passes; what names the condition in the timeout error, with the
// last detail cond gave.
func (e *Env) WaitUntil(timeout time.Duration, what string, cond func() (ok bool, detail string, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, detail, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s (last: %s)", timeout, what, detail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *Env) stop(t testing.TB) func() {
	return func() {
		out, err := exec.Command("bash", e.script, "stop", e.Dir).CombinedOutput()
		if err != nil {
			t.Errorf("kubetest: stop: %v\n%s", err, out)
		}
	}
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// build runs the script's build once per test binary: a no-op in a second
// or two when the cache is warm.
func build(t testing.TB, script string) (string, error) {
	buildOnce.Do(func() {
		out, err := exec.Command("bash", script, "env").Output()
		if err != nil {
			buildErr = fmt.Errorf("%s env: %w", script, err)
			return
		}
		bin := strings.TrimSpace(string(out))
		if !built(bin) {
			// A cold build takes about ten minutes: fail fast rather than
			// die in the middle of it at go test's default 10 min timeout.
			if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
				if dl, has := d.Deadline(); has && time.Until(dl) < 25*time.Minute {
					buildErr = fmt.Errorf("Kubernetes is not built yet in %s and the test deadline is in %s: "+
						"run `scripts/kube-testenv.sh build` first, or go test -timeout 40m",
						bin, time.Until(dl).Round(time.Second))
					return
				}
			}
			t.Logf("kubetest: building Kubernetes into %s (first time: ~10 min)", bin)
		}
		cmd := exec.Command("bash", script, "build")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		cmd.Stderr = os.Stderr // progress of a long build
		if err := cmd.Run(); err != nil {
			buildErr = err
			return
		}
		buildBin = strings.TrimSpace(lastLine(stdout.String()))
	})
	return buildBin, buildErr
}

func built(bin string) bool {
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return false
		}
	}
	return true
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// FindScript finds scripts/kube-testenv.sh in the first parent of the working
// directory (a test runs in its package's directory) that has it.
func FindScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "kube-testenv.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/kube-testenv.sh not found above the working directory")
		}
		dir = parent
	}
}
