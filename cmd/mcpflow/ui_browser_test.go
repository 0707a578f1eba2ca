package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The web UI in a real browser: headless Chromium (Debian's chromium),
// driven with chromedp, against `mcpflow server` as a child process. A
// screenshot of each page is written to $MCPFLOW_TEST_OUTPUT (CI keeps
// the folder as an artifact), or to a temporary folder.

// chromiumPath finds the browser. Without one the test is skipped, except
// in CI, where it fails: CI installs chromium.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed, and CI must run the browser test: apt-get install chromium")
	}
	t.Skip("chromium is not installed: apt-get install chromium (Debian) to run the browser test")
	return ""
}

// testOutput is the folder screenshots go to.
func testOutput(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCPFLOW_TEST_OUTPUT")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startServer starts `mcpflow server --listen 127.0.0.1:0` in c's
// workspace, with extra flags, and returns its base URL; cleanup stops it
// with SIGTERM.
func startServer(t *testing.T, c *cli, extra ...string) string {
	t.Helper()
	cmd := c.command(append([]string{"server", "--listen", "127.0.0.1:0", "--grace", "2s"}, extra...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "http://"); ok {
				urls <- "http://" + strings.TrimSuffix(u, "/")
			}
		}
		io.Copy(io.Discard, out)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("mcpflow server: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("mcpflow server did not stop on SIGTERM\n%s", stderr.String())
		}
	})
	select {
	case u := <-urls:
		return u
	case err := <-exited:
		t.Fatalf("mcpflow server exited: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("mcpflow server printed no address\n%s", stderr.String())
	}
	return ""
}

// apiRun reads a run through the API.
func apiRun(t *testing.T, base, id string) (status string, steps []map[string]any) {
	t.Helper()
	res, err := http.Get(base + "/api/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var run struct {
		Status      string           `json:"status"`
		Invocations []map[string]any `json:"invocations"`
	}
	if err := json.NewDecoder(res.Body).Decode(&run); err != nil {
		t.Fatal(err)
	}
	return run.Status, run.Invocations
}

// submit starts outcome-unknown.yaml through the API.
func submit(t *testing.T, base string) string {
	t.Helper()
	res, err := http.Post(base+"/api/runs", "application/json", strings.NewReader(`{"file": "outcome-unknown.yaml"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var started struct{ Run string }
	if err := json.NewDecoder(res.Body).Decode(&started); err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d, %v", res.StatusCode, err)
	}
	return started.Run
}

// waitBlocked waits for run to block.
func waitBlocked(t *testing.T, base, run string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _ := apiRun(t, base, run)
		if status == "blocked" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want blocked", run, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// browser is a headless Chromium driven by chromedp for one test.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	alloc, cancel := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("force-color-profile", "srgb"),
	)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel)
	return &browser{t: t, ctx: ctx}
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// live does one step on a live page, which swaps its region in when the
// server reports a change (ui.js): a step that found its node just before
// the swap finds it gone, and is tried again on the fresh one.
func (b *browser) live(what string, step chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	for try := 0; ; try++ {
		err := chromedp.Do(b.ctx, step)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "Could not find node") || try == 20 {
			b.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shot returns the function that writes a screenshot of the page to dir.
func (b *browser) shot(dir string) func(name string) {
	return func(name string) {
		b.t.Helper()
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			b.t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// until waits, up to 20 s, for the page's JavaScript expression js to be
// true, without reloading: what the page shows changes only by itself.
func (b *browser) until(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("#live")))
			b.t.Fatalf("%s: not so after 20 s (%v); the page shows:\n%s", what, err, html)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestBrowserResolveAndResume(t *testing.T) {
	chromium := chromiumPath(t)
	out := testOutput(t)
	c := newCLI(t)
	c.env = append(c.env, "MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append")
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "workflows", "outcome-unknown.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.workspace, "outcome-unknown.yaml"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	base := startServer(t, c)

	// Submit through the API; the charge's answer is lost: blocked.
	run := submit(t, base)
	waitBlocked(t, base, run)

	b := newBrowser(t, chromium)
	do, live, shot, text := b.do, b.live, b.shot(out), b.text

	do("the runs list", chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q] .run-blocked`, run))))
	shot("ui-runs.png")

	live("open the blocked run", chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[href="/runs/%s"]`, run))))
	do("the blocked run", chromedp.WaitVisible(chromedp.CSS(`.timeline .tl-bar.st-outcome_unknown`)))
	if got := text("#run-status"); got != "blocked" {
		t.Errorf("run page status %q, want blocked", got)
	}
	do("the timeline marks the decision", chromedp.WaitReady(chromedp.CSS(`.timeline .tl-mark.mark-decision`)))
	shot("ui-run-blocked.png")

	live("open the invocation", chromedp.Click(chromedp.CSS(`.callout a.resolve-link`)))
	do("the invocation", chromedp.WaitVisible(chromedp.CSS(`#resolve form`)))
	if got := text("#inv-state"); got != "outcome_unknown" {
		t.Errorf("invocation state %q, want outcome_unknown", got)
	}
	live("choose completed", chromedp.Click(chromedp.CSS(`input[name=as][value=completed]`)))
	live("type the result", chromedp.SendKeys(chromedp.CSS(`textarea[name=result]`), `{"structuredContent": {"row": 1}}`))
	live("type the reason", chromedp.SendKeys(chromedp.CSS(`textarea[name=reason]`), "charge found in the ledger, row 1"))
	shot("ui-invocation.png")

	live("resolve", chromedp.Click(chromedp.CSS(`#resolve-submit`)))
	do("resolved", chromedp.WaitVisible(chromedp.CSS(`.flash-ok`)))
	if got := text(".flash-ok"); !strings.Contains(got, "resolved as completed") {
		t.Errorf("flash %q", got)
	}
	live("resume", chromedp.Click(chromedp.CSS(`#resume`)))
	do("resumed", chromedp.WaitVisible(chromedp.CSS(`#run-status.run-succeeded`)))
	do("the timeline of the run", chromedp.WaitVisible(chromedp.CSS(`.timeline .tl-mark.mark-resolution`)))
	shot("ui-run.png")

	// The same page on a phone.
	do("a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#run-status.run-succeeded`)))
	shot("ui-run-phone.png")

	status, invs := apiRun(t, base, run)
	if status != "succeeded" || len(invs) != 2 {
		t.Fatalf("run %s: %s with %d invocations", run, status, len(invs))
	}
	charge := invs[0]
	res0, _ := charge["resolutions"].([]any)
	if charge["state"] != "completed" || len(res0) != 1 {
		t.Fatalf("charge: %v", charge)
	}
	r := res0[0].(map[string]any)
	if r["as"] != "completed" || r["why"] != "charge found in the ledger, row 1" || r["by"] == "" {
		t.Errorf("resolution %v", r)
	}
	// The charge happened once: the UI sent nothing again.
	ledger, err := os.ReadFile(filepath.Join(c.workspace, ".mcpflow", "demo", "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(ledger), `"tool":"ledger_append"`); n != 1 {
		t.Errorf("%d charges in the ledger, want 1:\n%s", n, ledger)
	}

	// Live updates: a run submitted while the list is open shows up in it
	// without a reload.
	do("the runs list, open", chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#live-state.on`)))
	second := submit(t, base)
	do("a new run appears", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q]`, second))))
	waitBlocked(t, base, second)
	for _, name := range []string{"ui-runs.png", "ui-run-blocked.png", "ui-invocation.png", "ui-run.png", "ui-run-phone.png"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", name, err)
		}
	}
	t.Logf("screenshots in %s", out)
}

// TestBrowserApproveGoesOn: approving in the web UI continues the run, and
// the run page follows it without a reload: no red "waits for approval"
// box stays behind once the step is approved, the next gate's form shows
// up when the run gets there, and a decision taken elsewhere (the API, as
// another terminal's mcpflow approve) changes the open page at once.
func TestBrowserApproveGoesOn(t *testing.T) {
	chromium := chromiumPath(t)
	out := testOutput(t)
	c := newCLI(t)
	c.workflow("gates.yaml", gatesWorkflow)
	base := startServer(t, c)
	submitGates := func() string {
		t.Helper()
		res, err := http.Post(base+"/api/runs", "application/json", strings.NewReader(`{"file": "gates.yaml"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var started struct{ Run string }
		if err := json.NewDecoder(res.Body).Decode(&started); err != nil || res.StatusCode != http.StatusAccepted {
			t.Fatalf("submit: %d, %v", res.StatusCode, err)
		}
		waitBlocked(t, base, started.Run)
		return started.Run
	}
	b := newBrowser(t, chromium)
	shot := b.shot(out)
	// pending is the expression that is true when the page offers to
	// decide step (and only it).
	pending := func(step string) string {
		return fmt.Sprintf(`(() => { const f = [...document.querySelectorAll(".approvals-pending form.decide input[name=step]")].map(i => i.value); return f.length === 1 && f[0] === %q })()`, step)
	}
	// noBox: no red error box says the run waits for approval.
	const noBox = `![...document.querySelectorAll("#live .error")].some(e => e.textContent.includes("waits for approval"))`

	run := submitGates()
	b.do("the blocked run", chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(base+"/runs/"+run),
		chromedp.WaitVisible(chromedp.CSS(`#live-state.on`)))
	b.until("the form of deploy's gate, and the box that says the run waits", pending("deploy")+` && !(`+noBox+`)`)
	shot("ui-approve-pending.png")
	b.live("type the reason", chromedp.SendKeys(chromedp.CSS(`.approvals-pending input[name=reason]`), "change 4711"))
	b.live("approve", chromedp.Click(chromedp.CSS(`.approvals-pending button[value=approved]`)))
	b.do("approved", chromedp.WaitVisible(chromedp.CSS(`.flash-ok`)))
	if got := b.text(".flash-ok"); !strings.Contains(got, "Step deploy approved by") || !strings.Contains(got, "The run goes on.") {
		t.Errorf("flash %q", got)
	}
	// The run goes on, in the server, to the next gate: the page follows.
	b.until("the form of announce's gate, no box about deploy", pending("announce")+
		` && ![...document.querySelectorAll("#live .error")].some(e => e.textContent.includes("step deploy waits"))`)
	shot("ui-approve-next-gate.png")
	b.live("approve announce", chromedp.Click(chromedp.CSS(`.approvals-pending button[value=approved]`)))
	b.until("the run succeeded, nothing waits", `document.querySelector("#run-status.run-succeeded") !== null && `+
		`document.querySelector(".approvals-pending") === null && `+noBox)
	shot("ui-approve-done.png")
	if status, steps := apiRun(t, base, run); status != "succeeded" || len(steps) != 3 {
		t.Fatalf("run %s: %s with %d steps", run, status, len(steps))
	}

	// Decided elsewhere while the page is open: the page changes by
	// itself. Recorded only (no_continue): the box that said the run
	// waits gives way to one that says it is decided.
	second := submitGates()
	b.do("the second run", chromedp.Navigate(base+"/runs/"+second), chromedp.WaitVisible(chromedp.CSS(`#live-state.on`)))
	b.until("deploy's gate", pending("deploy"))
	res, err := http.Post(base+"/api/runs/"+second+"/approve", "application/json", strings.NewReader(`{"step": "deploy", "no_continue": true}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("approve through the API: %d", res.StatusCode)
	}
	b.until("the page says deploy is decided", `document.querySelector("#decided") !== null && `+
		`document.querySelector(".approvals-pending") === null && `+noBox)
	shot("ui-approve-decided.png")
	// And a decision that continues the run: the page follows it to the
	// next gate.
	res, err = http.Post(base+"/api/runs/"+second+"/resume", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	b.until("announce's gate, after the resume", pending("announce"))
	t.Logf("screenshots in %s", out)
}
