package lb_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/examples/sample/internal/sampletest"
	"github.com/ferry-upgrade/ferry/examples/sample/lb"
)

// TestHostMaintenance: locking a host takes all its backends out of
// rotation (a and c on h1: only b answers), the capacity call says
// whether the backends left fit (?min=), 409 with the count when not,
// and unlocking puts them back; a backend's own drain stays its own.
func TestHostMaintenance(t *testing.T) {
	t.Parallel()
	h := start(t, "a@h1", "b@h2", "c@h1", "d@h3")
	if code, body := sampletest.Do(http.MethodGet, h.admin+"/admin/hosts/h1/capacity?min=2", nil); code != http.StatusOK || !strings.Contains(body, `"left":2`) {
		t.Fatalf("capacity of h1 with min 2: %d %s, want 200 with 2 left (b, d)", code, body)
	}
	if code, body := sampletest.Do(http.MethodPost, h.admin+"/admin/hosts/h1/lock?timeout=2s", nil); code != http.StatusOK {
		t.Fatalf("lock h1: %d %s", code, body)
	}
	for _, who := range h.send(t, 8) {
		if who == "a" || who == "c" {
			t.Fatalf("%s answered with its host h1 locked", who)
		}
	}
	code, body := sampletest.Do(http.MethodGet, h.admin+"/admin/hosts/h2/capacity?min=2", nil)
	if code != http.StatusConflict || !strings.Contains(body, `"left":1`) || !strings.Contains(body, `"locked":["h1"]`) {
		t.Fatalf("capacity of h2 with h1 locked: %d %s, want 409: 1 left", code, body)
	}
	if code, body := sampletest.Do(http.MethodGet, h.admin+"/admin/hosts/h2/capacity?min_hosts=2", nil); code != http.StatusConflict || !strings.Contains(body, `"hosts_left":1`) {
		t.Fatalf("capacity of h2 with h1 locked, 2 hosts to stay: %d %s, want 409: 1 host left (h3)", code, body)
	}
	if bs, err := lb.ParseBackends([]string{"a=127.0.0.1:1@h1"}); err != nil || bs[0] != (lb.Backend{Name: "a", Addr: "127.0.0.1:1", Host: "h1"}) {
		t.Fatalf("ParseBackends with a host: %v %v", bs, err)
	}
	// b drained on its own, then h1 unlocked: a and c back, b not.
	if code, _ := sampletest.Do(http.MethodPost, h.admin+"/admin/backends/b/drain", nil); code != http.StatusOK {
		t.Fatalf("drain b: %d", code)
	}
	if code, _ := sampletest.Do(http.MethodPost, h.admin+"/admin/hosts/h1/unlock", nil); code != http.StatusOK {
		t.Fatalf("unlock h1: %d", code)
	}
	who := h.send(t, 9)
	slices.Sort(who)
	if who = slices.Compact(who); !slices.Equal(who, []string{"a", "c", "d"}) {
		t.Fatalf("answered by %v after h1's unlock with b drained, want a, c, d", who)
	}
	if code, body := sampletest.Do(http.MethodGet, h.admin+"/admin/hosts", nil); code != http.StatusOK || !strings.Contains(body, `"locked":[]`) {
		t.Fatalf("hosts: %d %s, want none locked", code, body)
	}
}
