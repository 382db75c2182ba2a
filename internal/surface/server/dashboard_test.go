package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
)

// artifactDir is where browser tests leave their screenshots:
// $FERRY_TEST_ARTIFACTS, or ferry-test-artifacts in the temporary
// directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FERRY_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ferry-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts headless Chromium (Debian's; scripts/deps.sh installs
// it) and returns a chromedp context on a new tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("FERRY_CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		t.Skip("chromium not found: run scripts/deps.sh (Debian's chromium) or set FERRY_CHROMIUM; the dashboard's browser test is skipped")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium (%s): %v", path, err)
	}
	return ctx
}

// waitJS evaluates the boolean expression every 100ms until it holds
// or limit passes.
func waitJS(t *testing.T, ctx context.Context, limit time.Duration, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		last = err
		if time.Now().After(deadline) {
			state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("state").textContent + " | " + document.getElementById("message").textContent`))
			t.Fatalf("dashboard: %s: not within %s (last error %v; state | message: %s)", what, limit, last, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func text(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// TestDashboardDrivesAnUpgrade opens the dashboard in headless
// Chromium over a real sample cluster, starts the upgrade to 2.0.0 with
// its button (with the description's traffic, drawn live in the
// traffic chart), pauses and resumes it with its buttons, and sees the
// member table reach 2.0.0 and the state completed.
func TestDashboardDrivesAnUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real sample cluster and a browser; not with -short")
	}
	ctx := browser(t)
	cl := startCluster(t, 1500*time.Millisecond)
	s := clusterServer(t, cl)
	c := serve(t, s)

	// The token arrives in the fragment, which never leaves the
	// browser; the page keeps it in sessionStorage and drops it from
	// the address.
	if err := chromedp.Do(ctx, chromedp.Navigate(c.base+"/dashboard/#token="+s.cfg.Token)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 20*time.Second, "seven members on 1.0.0",
		`[...document.querySelectorAll("#members tbody td.running")].filter(td => td.textContent === "1.0.0").length === 7`)
	if loc := text(t, ctx, `location.href`); strings.Contains(loc, "token") {
		t.Fatalf("the token stays in the address: %s", loc)
	}
	if text(t, ctx, `sessionStorage.getItem("ferry-token")`) != s.cfg.Token {
		t.Fatal("the token is not in sessionStorage")
	}
	waitJS(t, ctx, 10*time.Second, "2.0.0 offered to upgrade to", `document.getElementById("start-to").value === "2.0.0"`)
	waitJS(t, ctx, 10*time.Second, "Start enabled, Pause and Resume not, with no upgrade", buttons(true, false, false))
	waitJS(t, ctx, 10*time.Second, "the event stream connected", `document.getElementById("conn").classList.contains("live")`)

	// With the description's traffic: the chart draws it live.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#start-traffic")), chromedp.Click(chromedp.CSS("#btn-start"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 30*time.Second, "an upgrading state", `document.getElementById("state").textContent.startsWith("upgrading-")`)
	waitJS(t, ctx, 10*time.Second, "Pause enabled, Resume and Start not, while it upgrades",
		`document.getElementById("state").textContent.startsWith("upgrading-") && `+buttons(false, true, false))
	// The changes made outside the members and not undone yet are
	// listed: the upgrade's own flag is set for its whole duration.
	waitJS(t, ctx, 10*time.Second, "the upgrade's flag listed among the effects not undone yet",
		`(() => { const b = document.getElementById("trouble"); return b.textContent.includes("not undone yet") && b.textContent.includes("/admin/flags/upgrade"); })()`)
	waitJS(t, ctx, 20*time.Second, "the traffic chart with p50 and p99 lines past the baseline",
		`(() => { const c = document.getElementById("traffic-chart"); const p = c.querySelector("path.p99");
		  return !document.getElementById("traffic-panel").hidden && p !== null && p.getAttribute("d").split("L").length > 4 &&
		    c.querySelector("path.p50") !== null && c.querySelector("rect.base") !== null; })()`)
	waitJS(t, ctx, 30*time.Second, "the batch in progress as a band in the traffic chart",
		`document.querySelector("#traffic-chart rect.band.cur") !== null`)
	screenshot(t, ctx, "dashboard-traffic.png")
	waitJS(t, ctx, 10*time.Second, "the current batch highlighted in the plan", `document.querySelector("#plan .batch.current .chip") !== null`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#btn-pause"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, time.Minute, "state paused", `document.getElementById("state").textContent === "paused"`)
	// Opened anew during the upgrade (the token from sessionStorage):
	// the chart comes back with the traffic so far.
	if err := chromedp.Do(ctx, chromedp.Navigate(c.base+"/dashboard/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 20*time.Second, "the traffic chart with data in a dashboard opened during the upgrade",
		`(() => { const p = document.querySelector("#traffic-chart path.p99");
		  return !document.getElementById("traffic-panel").hidden && p !== null && p.getAttribute("d").split("L").length > 4 &&
		    document.querySelector("#traffic-chart rect.band") !== null; })()`)
	waitJS(t, ctx, 10*time.Second, "state paused after the reload", `document.getElementById("state").textContent === "paused"`)
	screenshot(t, ctx, "dashboard-paused.png")
	if u := current(t, c).Upgrade; u.State != upgrade.StatePaused.String() || u.Intent.Kind != "pause" {
		t.Fatalf("the API says %s, intent %+v", u.State, u.Intent)
	}
	waitJS(t, ctx, 10*time.Second, "Resume enabled, Pause and Start not, while paused", buttons(false, false, true))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#btn-resume"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 2*time.Minute, "state completed", `document.getElementById("state").textContent === "completed"`)
	waitJS(t, ctx, 20*time.Second, "seven members on 2.0.0 in the table",
		`[...document.querySelectorAll("#members tbody td.running")].filter(td => td.textContent === "2.0.0").length === 7`)
	waitJS(t, ctx, 10*time.Second, "the events of the pause, the resume and the end",
		`(() => { const t = document.getElementById("events").textContent; return t.includes("pause requested") && t.includes("resume requested") && t.includes("→ completed"); })()`)
	waitJS(t, ctx, 10*time.Second, "versions: kv ×3 and api ×4 on 2.0.0",
		`document.getElementById("versions").textContent.includes("kv: 2.0.0 ×3") && document.getElementById("versions").textContent.includes("api: 2.0.0 ×4")`)
	// Once it ended: who drove it, and Start refused with the reason
	// (2.0.0 runs; no release in the catalog is reachable from it).
	waitJS(t, ctx, 10*time.Second, "driven by: server once completed", `document.getElementById("driven").textContent === "driven by: server"`)
	waitJS(t, ctx, 10*time.Second, "Start, Pause and Resume disabled once completed, with no release to pick", buttons(false, false, false)+
		` && document.getElementById("start-to").options.length === 0 && document.getElementById("start-why").textContent.startsWith("no release to upgrade to")`+
		` && document.getElementById("btn-start").title.startsWith("no release to upgrade to")`)
	screenshot(t, ctx, "dashboard-completed.png")
	if u := current(t, c).Upgrade; u.State != upgrade.StateCompleted.String() {
		t.Fatalf("the API says %s: %s", u.State, u.Reason)
	}
}

// buttons is a JavaScript condition: Start, Pause and Resume enabled
// as given, and no other way.
func buttons(start, pause, resume bool) string {
	return fmt.Sprintf(`(() => { const on = (id) => !document.getElementById(id).disabled;
	  return on("btn-start") === %t && on("btn-pause") === %t && on("btn-resume") === %t; })()`, start, pause, resume)
}
