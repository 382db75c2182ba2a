package kubernetes

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestDrainOutputLevels: the drain helper's lines become the driver's
// log lines, its errors warnings, except its note that a DaemonSet's
// pods stay on the node, which every drain of a node running one makes
// (StarlingX's networking plugin on every host) and is no warning.
func TestDrainOutputLevels(t *testing.T) {
	var out bytes.Buffer
	d := &Driver{log: slog.New(slog.NewTextHandler(&out, nil))}
	r := &drainRecorder{d: d, ctx: context.Background(), node: "worker-2", attempts: map[string]int{}, blockers: map[string]string{}}
	r.writer(true).Write([]byte("WARNING: ignoring DaemonSet-managed Pods: kube-system/calico-node-72cxl\n"))
	r.writer(true).Write([]byte("error when evicting pods/\"web-1\" -n \"apps\" (will retry after 2s): Cannot evict pod\n"))
	r.writer(false).Write([]byte("evicting pod apps/web-1\n"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []struct{ level, text string }{
		{"INFO", "ignoring DaemonSet-managed Pods"},
		{"WARN", "Cannot evict pod"},
		{"INFO", "evicting pod apps/web-1"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], "level="+w.level) || !strings.Contains(lines[i], w.text) || !strings.Contains(lines[i], "node=worker-2") {
			t.Errorf("line %d: %s; want level %s with %q and the node", i, lines[i], w.level, w.text)
		}
	}
}
