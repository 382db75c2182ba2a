package substrate_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate"
	_ "github.com/ferry-upgrade/ferry/internal/substrate/all"
	"github.com/ferry-upgrade/ferry/internal/substrate/kubernetes"
	"github.com/ferry-upgrade/ferry/internal/substrate/process"
	"github.com/ferry-upgrade/ferry/internal/substrate/ssh"
)

func TestRegistered(t *testing.T) {
	if got, want := substrate.Names(), []string{kubernetes.Name, process.Name, ssh.Name}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v (sorted, every substrate internal/substrate/all links)", got, want)
	}
	if got := config.DefaultSubstrate(); got != process.Name {
		t.Errorf("the default substrate is %q, want %s", got, process.Name)
	}
	_, err := substrate.Lookup("vm")
	if !errors.Is(err, substrate.ErrUnknown) || !strings.Contains(err.Error(), `unknown substrate "vm"; this build has: kubernetes, process, ssh`) {
		t.Errorf("Lookup(vm) = %v, want ErrUnknown listing kubernetes, process, ssh", err)
	}
}

// TestRequire refuses by the capability's name what a substrate cannot
// do, and passes what it can.
func TestRequire(t *testing.T) {
	for _, tc := range []struct {
		substrate string
		cap       substrate.Capability
		want      string // "" for allowed
	}{
		{process.Name, substrate.StartStop, ""},
		{process.Name, substrate.ClusterUp, ""},
		{process.Name, substrate.Adopt, ""},
		{process.Name, substrate.Output, ""},
		{process.Name, substrate.LockHost, "substrate process cannot lock a host (capability lock-host)"},
		{process.Name, substrate.Discover, "substrate process cannot find members at run time (capability discover)"},
		{kubernetes.Name, substrate.StartStop, ""},
		{kubernetes.Name, substrate.Discover, ""},
		{kubernetes.Name, substrate.ClusterUp, "substrate kubernetes cannot bring a cluster up and down (capability cluster-up)"},
		{kubernetes.Name, substrate.Adopt, "substrate kubernetes cannot adopt a member it did not start (capability adopt)"},
		{kubernetes.Name, substrate.LockHost, "substrate kubernetes cannot lock a host (capability lock-host)"},
		{kubernetes.Name, substrate.Output, ""},
	} {
		err := substrate.Require(&config.Cluster{Substrate: tc.substrate}, tc.cap)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v, want allowed", tc.substrate, tc.cap, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, substrate.ErrIncapable)):
			t.Errorf("%s %s: %v, want ErrIncapable %q", tc.substrate, tc.cap, err, tc.want)
		}
	}
	if err := substrate.Require(&config.Cluster{Substrate: "vm"}, substrate.StartStop); !errors.Is(err, substrate.ErrUnknown) {
		t.Errorf("Require on vm: %v, want ErrUnknown", err)
	}
}

// TestNewRefusesWhatTheSubstrateCannot: a description that needs a
// capability its substrate lacks is refused by New, naming both, before
// any driver exists.
func TestNewRefusesWhatTheSubstrateCannot(t *testing.T) {
	c := &config.Cluster{Substrate: kubernetes.Name, Components: []config.Component{
		{Name: "mon", Workload: &config.Workload{Kind: config.KindStatefulSet, Name: "mon"}},
		{Name: "osd", Workload: &config.Workload{Kind: config.KindDaemonSet, Name: "osd"}, Adopt: &config.Adopt{Listen: true}},
	}}
	_, err := substrate.New(c, substrate.Options{})
	var ie *substrate.IncapableError
	if !errors.As(err, &ie) || ie.Capability != substrate.Adopt || ie.For != "components[1].adopt" {
		t.Fatalf("New = %v, want an IncapableError for adopt at components[1].adopt", err)
	}
	if want := "substrate kubernetes cannot adopt a member it did not start (capability adopt), which components[1].adopt needs"; err.Error() != want {
		t.Errorf("New = %q, want %q", err, want)
	}

	p := &config.Cluster{Substrate: process.Name, Components: []config.Component{{Name: "kv"}}}
	_, err = substrate.New(p, substrate.Options{})
	if !errors.As(err, &ie) || ie.Capability != substrate.Discover || ie.For != "components[0].members" {
		t.Errorf("New(process, no members) = %v, want an IncapableError for discover at components[0].members", err)
	}
	if _, err := substrate.New(&config.Cluster{Substrate: "vm"}, substrate.Options{}); !errors.Is(err, substrate.ErrUnknown) {
		t.Errorf("New(vm) = %v, want ErrUnknown", err)
	}
}

// TestDriversHaveTheirCapabilities: what a substrate declares is what
// its driver implements (the optional driver interfaces), so that a
// refusal by capability never contradicts the driver.
func TestDriversHaveTheirCapabilities(t *testing.T) {
	ps, err := substrate.Lookup(process.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.CheckDriver(process.New(nil)); err != nil {
		t.Error(err)
	}
	ks, err := substrate.Lookup(kubernetes.Name)
	if err != nil {
		t.Fatal(err)
	}
	// A kubeconfig naming a server that is never asked: building the
	// driver makes no request.
	kd, err := kubernetes.NewForConfig(kubeRestConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.CheckDriver(kd); err != nil {
		t.Error(err)
	}
	ss, err := substrate.Lookup(ssh.Name)
	if err != nil {
		t.Fatal(err)
	}
	sd, err := ssh.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.CheckDriver(sd); err != nil {
		t.Error(err)
	}
}

func TestCapabilityNames(t *testing.T) {
	all := substrate.Can(substrate.StartStop, substrate.ClusterUp, substrate.Adopt, substrate.LockHost, substrate.Output, substrate.Discover, substrate.Undo, substrate.ReinstallHost, substrate.BackupOnHost)
	if got, want := all.String(), "start-stop, cluster-up, adopt, lock-host, output, discover, undo, reinstall-host, backup-on-host"; got != want {
		t.Errorf("every capability: %q, want %q", got, want)
	}
	if got := process.Capabilities.String(); got != "start-stop, cluster-up, adopt, output" {
		t.Errorf("process: %q", got)
	}
	if got := kubernetes.Capabilities.String(); got != "start-stop, output, discover, undo" {
		t.Errorf("kubernetes: %q", got)
	}
	if got := ssh.Capabilities.String(); got != "start-stop, cluster-up, adopt, lock-host, output, reinstall-host, backup-on-host" {
		t.Errorf("ssh: %q", got)
	}
}

func kubeRestConfig() *rest.Config { return &rest.Config{Host: "https://127.0.0.1:1"} }
