package controller_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// TestOverridesNameTheirAuthor: on a real control plane, two operators
// authenticated by their own tokens (alice and bob, bound to
// deploy/controller.yaml's ferry-upgrade-operator in the namespace)
// add overrides to an Upgrade's spec. deploy/crd.yaml's admission
// policy refuses an entry whose by is not the user writing it (alice
// writing bob's name; the admin writing alice's), and the change or
// removal of an entry already there (and the CRD's schema a revoke that
// expires, a for that is no duration); the controller records each entry
// taken in with its by, component, phase and expiry, the revoke as an
// entry of its own. Neither operator may write the status (the record).
func TestOverridesNameTheirAuthor(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{Nodes: 1})
	sa := install(t, env)
	if out, err := env.Kubectl("get", "validatingadmissionpolicies", "upgrades.ferry.dev-overrides", "-o", "name"); err != nil || !strings.Contains(out, "upgrades.ferry.dev-overrides") {
		t.Fatalf("the admission policy of deploy/crd.yaml is not served: %q %v", out, err)
	}
	if err := env.Apply(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: operators, namespace: ferry-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ferry-upgrade-operator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
`); err != nil {
		t.Fatal(err)
	}
	for _, user := range kubetest.Users {
		out, err := env.KubectlAs(user, "", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		if err != nil || out != user {
			t.Fatalf("%s's token: whoami says %q (%v)", user, out, err)
		}
		for verb, want := range map[string]string{"patch upgrades": "yes", "update upgrades --subresource=status": "no",
			"patch upgrades --subresource=status": "no", "delete upgrades": "no"} {
			out, _ := env.KubectlAs(user, "", append([]string{"auth", "can-i", "-n", "ferry-system"}, strings.Fields(verb)...)...)
			if strings.TrimSpace(out) != want {
				t.Errorf("%s may %s: %q, want %s", user, verb, strings.TrimSpace(out), want)
			}
		}
	}
	startMons(t, env)
	startController(t, sa, "controller-a")
	desc := monDescription + fmt.Sprintf(`  - version: 1.0.0
    artifacts: {mon: {image: "registry.local/mon:1.0.0", sha256: "%s"}}
  - version: 2.0.0
    upgrade_from: [1.0.0]
    artifacts: {mon: {image: "registry.local/mon:2.0.0", sha256: "%s"}}
`, sha1, sha2)
	// Paused from the start: it stays running (not ended) while the
	// operators write overrides.
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "ferry.dev/v1alpha1", "kind": "Upgrade",
		"metadata": map[string]any{"name": "held", "namespace": "ferry-system"},
		"spec":     map[string]any{"description": desc, "to": "2.0.0", "action": "pause", "actionSeq": 1},
	})
	if _, err := env.KubectlAs("alice", string(b), "apply", "-f", "-"); err != nil {
		t.Fatalf("alice creates the Upgrade: %v", err)
	}
	if err := env.WaitUntil(3*time.Minute, "the upgrade paused", func() (bool, string, error) {
		u := getUpgrade(t, env, "held")
		return u.Status.State == "paused", fmt.Sprintf("state %q reason %q", u.Status.State, u.Status.Reason), nil
	}); err != nil {
		t.Fatal(err)
	}

	patch := func(as string, entries ...string) error {
		_, err := env.KubectlAs(as, "", "patch", "upgrade", "held", "-n", "ferry-system", "--type=merge",
			"-p", `{"spec":{"overrides":[`+strings.Join(entries, ",")+`]}}`)
		return err
	}
	const (
		alices  = `{"predicate":"quorum","component":"mon","phase":true,"for":"30m","reason":"mon-0's disk is being replaced","by":"alice"}`
		forged  = `{"predicate":"gate","member":"mon-1","by":"bob"}`
		bobs    = `{"predicate":"quorum","component":"mon","phase":true,"revoke":true,"by":"bob"}`
		changed = `{"predicate":"quorum","component":"mon","phase":true,"for":"30m","reason":"no reason","by":"alice"}`
	)
	if err := patch("alice", alices); err != nil {
		t.Fatalf("alice's override by alice: %v", err)
	}
	refused := func(what string, err error, says string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v; want refused by the admission policy saying %q", what, err, says)
		} else {
			t.Logf("%s: refused: %v", what, err)
		}
	}
	refused("alice adding an override by bob", patch("alice", alices, forged), "must name its author in by: alice")
	refused("the admin adding an override by alice", func() error {
		_, err := env.Kubectl("patch", "upgrade", "held", "-n", "ferry-system", "--type=merge",
			"-p", `{"spec":{"overrides":[`+alices+`,{"predicate":"gate","member":"mon-1","by":"alice"}]}}`)
		return err
	}(), "must name its author in by: ferry-admin")
	refused("bob changing alice's entry", patch("bob", changed, bobs), "may neither change nor go")
	refused("bob removing alice's entry", patch("bob", bobs), "may neither change nor go")
	refused("a revoke that expires", patch("bob", alices, `{"predicate":"quorum","component":"mon","revoke":true,"for":"1m","by":"bob"}`), "a revoke does not expire")
	refused("a for that is no duration", patch("bob", alices, `{"predicate":"gate","for":"soon","by":"bob"}`), "spec.overrides[1].for")
	if err := patch("bob", alices, bobs); err != nil {
		t.Fatalf("bob's revoke by bob: %v", err)
	}

	var got []upgrade.Override
	if err := env.WaitUntil(time.Minute, "both overrides in the record", func() (bool, string, error) {
		u := getUpgrade(t, env, "held")
		rec, err := upgrade.Decode(u.Status.Record)
		if err != nil {
			return false, "", err
		}
		got = rec.Overrides
		return len(got) >= 2, fmt.Sprintf("%d overrides recorded", len(got)), nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, o := range got {
		t.Logf("recorded: %s", o.Act())
	}
	if len(got) != 2 {
		t.Fatalf("%d overrides recorded, want alice's and bob's revoke", len(got))
	}
	a, r := got[0], got[1]
	if a.By != "alice" || a.Predicate != "quorum" || a.Component != "mon" || a.Phase != 1 || a.Until.Sub(a.At) != 30*time.Minute || a.Reason != "mon-0's disk is being replaced" {
		t.Errorf("alice's override as recorded: %+v", a)
	}
	if r.By != "bob" || !r.Revoke || r.Component != "mon" || r.Phase != 1 {
		t.Errorf("bob's revoke as recorded: %+v", r)
	}
}
