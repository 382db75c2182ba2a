package server

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ferry-upgrade/ferry/internal/core/strategy"
)

// TestRefusalShown: a refusal is shown by its predicate's name with its
// reason, whatever the predicate: the system's own no (ok_to_stop)
// reaches GET /v1/upgrade as it is recorded, and the dashboard, which
// renders refusals generically, shows it in words ("refused:
// ok_to_stop refused app-1 (the system says no: …)").
func TestRefusalShown(t *testing.T) {
	o := offlineCluster(t)
	s := newTestServer(t, o)
	// Begun with another description, the upgrade is not driven here:
	// its record stays as it was written.
	u := stuckUpgrade(t, boltOf(s), strings.Repeat("ab", 32))
	const words = `the system says no: GET http://127.0.0.1:2/admin/ok-to-stop: status 409, want 2xx (body "held by the operator: shard 7")`
	u.Refusals = []strategy.Refusal{{Predicate: strategy.PredOKToStop, Member: "app-1", Reason: words}}
	u.Waiting = "ok_to_stop refused app-1 (" + words + ")"
	if err := boltOf(s).Save(u); err != nil {
		t.Fatal(err)
	}
	c := serve(t, s)
	var us UpgradeStatus
	c.do("GET", "/v1/upgrade", nil).expect(t, "GET", 200).json(t, &us)
	if rs := us.Upgrade.Refusals; len(rs) != 1 || rs[0].Predicate != "ok_to_stop" || rs[0].Member != "app-1" || rs[0].Reason != words {
		t.Fatalf("refusals in the API: %+v", rs)
	}

	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(c.base+"/dashboard/#token="+s.cfg.Token)); err != nil {
		t.Fatal(err)
	}
	want := "refused: ok_to_stop refused app-1 (" + words + ")"
	waitJS(t, ctx, 20*time.Second, "the refusal by name with the system's words",
		`[...document.querySelectorAll("#trouble p.refusal")].some(p => p.textContent === `+jsString(want)+`)`)
	screenshot(t, ctx, "dashboard-ok-to-stop.png")
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`", "$", `\$`)
	return "`" + r.Replace(s) + "`"
}
