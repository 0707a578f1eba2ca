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
	// The seconds the run waited for an operator are a gap of the
	// timeline, marked blocked, not the charge's time.
	do("the timeline marks the wait", chromedp.WaitVisible(chromedp.CSS(`.timeline .tl-gap.gap-blocked`)))
	if took := text(`tr.step-row td.took`); !strings.HasSuffix(took, "ms") {
		t.Errorf("the charge took %q: want its attempt's milliseconds, not the wait", took)
	}
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

// submitFile starts the workflow file of the workspace through the API,
// with inputs, and returns the run's id.
func submitFile(t *testing.T, base, file string, inputs map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"file": file, "inputs": inputs})
	res, err := http.Post(base+"/api/runs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var started struct{ Run string }
	if err := json.NewDecoder(res.Body).Decode(&started); err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("submit %s: %d, %v", file, res.StatusCode, err)
	}
	return started.Run
}

// waitStatus waits for run to be status.
func waitStatus(t *testing.T, base, run, status string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ := apiRun(t, base, run)
		if got == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s", run, got, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The workflows of TestBrowserRunPages.
const (
	// browserIO greets with a secret, and outputs a long string with no
	// space to break it at.
	browserIO = `name: io
inputs:
  token: {type: string, secret: true}
  blob: {type: string, default: "%s"}
servers:
  payments-ledger-service: {builtin: demo}
steps:
  - {id: greet, server: payments-ledger-service, tool: greet, with: {name: "Ada ${{ inputs.token }}"}}
  - {id: record, server: payments-ledger-service, tool: ledger_append, with: {entry: "${{ steps.greet.text }}"}}
outputs:
  blob: ${{ inputs.blob }}
`
	// browserOops retries a tool that answers with an error, with a long
	// message.
	browserOops = `name: oops
servers:
  payments-ledger-service: {builtin: demo}
steps:
  - id: charge
    server: payments-ledger-service
    tool: fail
    retry: {attempts: 2, backoff: 50ms}
    with: {message: "%s"}
`
	browserSlow = `name: slow
servers:
  demo: {builtin: demo}
steps:
  - {id: count, server: demo, tool: count_slowly, with: {n: 1000, delay_ms: 100}}
`
)

// TestBrowserRunPages goes through the run pages and the runs list in a
// browser: a step's arguments and result open inline (its secret input
// redacted), long JSON stays on the page, server/tool names are not
// broken mid-word, a tool error's attempts are coloured as errors, the
// list filters by workflow, status, server, tool and time, and a run
// cancelled from the UI says who cancelled it and why, is listed as
// cancelled (not blocked) and does not say it waits for an operator.
func TestBrowserRunPages(t *testing.T) {
	chromium := chromiumPath(t)
	out := testOutput(t)
	c := newCLI(t)
	const secret = "s3cr3t-t0ken-5f1e"
	blob := strings.Repeat("0123456789abcdef", 40)
	c.workflow("io.yaml", fmt.Sprintf(browserIO, blob))
	c.workflow("oops.yaml", fmt.Sprintf(browserOops, strings.Repeat("the ledger refused the charge because ", 8)))
	c.workflow("slow.yaml", browserSlow)
	base := startServer(t, c)

	io := submitFile(t, base, "io.yaml", map[string]any{"token": secret})
	waitStatus(t, base, io, "succeeded")
	oops := submitFile(t, base, "oops.yaml", nil)
	waitStatus(t, base, oops, "failed")
	slow := submitFile(t, base, "slow.yaml", nil)
	waitStatus(t, base, slow, "running")

	alloc, cancel := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("force-color-profile", "srgb"),
	)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	// The browser starts with its first action, and lives as long as
	// that action's context: this one, not a step's shorter one.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start the browser: %v", err)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(out, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// listed is the ids of the runs the list shows, in order.
	listed := func() string {
		t.Helper()
		ids := evalJS[[]string](t, ctx, "the listed runs", `Array.from(document.querySelectorAll("tr.run-row")).map(r => r.dataset.run)`)
		return strings.Join(ids, " ")
	}
	// noMidWordBreak reports the names in the steps' Call column that
	// wrap within themselves: each name's text must sit on one line.
	const noMidWordBreak = `(() => {
		const broken = [];
		for (const code of document.querySelectorAll("table.steps td[data-label=Call] code")) {
			const text = code.textContent, slash = text.indexOf("/");
			const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
			const nodes = [];
			for (let n = walker.nextNode(); n; n = walker.nextNode()) nodes.push(n);
			// One range per name: server before the slash, tool after.
			for (const [from, to] of [[0, slash], [slash + 1, text.length]]) {
				const r = document.createRange();
				let pos = 0, set = 0;
				for (const n of nodes) {
					const end = pos + n.length;
					if (!(set & 1) && from < end) { r.setStart(n, from - pos); set |= 1; }
					if (!(set & 2) && to <= end) { r.setEnd(n, to - pos); set |= 2; }
					pos = end;
				}
				const tops = new Set(Array.from(r.getClientRects()).filter(x => x.width > 0).map(x => Math.round(x.top)));
				if (tops.size > 1) broken.push(text.slice(from, to));
			}
		}
		return broken;
	})()`

	// A step's arguments and result, inline: closed, then opened; the
	// secret input redacted; the long output wraps on the page.
	do("the io run", chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(base+"/runs/"+io),
		chromedp.WaitVisible(chromedp.CSS(`#run-status.run-succeeded`)))
	var html string
	html = evalJS[string](t, ctx, "the page", `document.documentElement.outerHTML`)
	if strings.Contains(html, secret) {
		t.Errorf("the run page shows the secret input")
	}
	do("open the first step's arguments and result", chromedp.Click(chromedp.CSS(`tr.step-io details summary`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.step-io details[open] .io-result pre`)))
	var args, result string
	args = evalJS[string](t, ctx, "the arguments", `document.querySelector("tr.step-io details[open] .io-args pre").textContent`)
	result = evalJS[string](t, ctx, "the result", `document.querySelector("tr.step-io details[open] .io-result").textContent`)
	if !strings.Contains(args, `"name": "Ada [redacted]"`) || !strings.Contains(result, "Hello, Ada [redacted]!") {
		t.Errorf("inline arguments %q, result %q; want the greeting with the secret redacted", args, result)
	}
	var fits bool
	fits = evalJS[bool](t, ctx, "the page's width", `document.documentElement.scrollWidth <= window.innerWidth && Array.from(document.querySelectorAll("pre.json")).every(p => p.scrollWidth <= p.clientWidth + 1)`)
	if !fits {
		t.Error("JSON runs off the page (or its box) on a 1280px screen")
	}
	var broken []string
	broken = evalJS[[]string](t, ctx, "the call column", noMidWordBreak)
	if len(broken) > 0 {
		t.Errorf("names broken mid-word in the Call column: %q", broken)
	}
	var work string
	work = evalJS[string](t, ctx, "the work time", `document.querySelector("#run-work").textContent`)
	if !strings.Contains(work, "a call in flight") {
		t.Errorf("work time %q", work)
	}
	shot("ui-run-io.png")

	// On a phone the same: nothing wider than the screen, no name broken.
	do("a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#run-status.run-succeeded`)),
		chromedp.Click(chromedp.CSS(`tr.step-io details summary`)), chromedp.WaitVisible(chromedp.CSS(`tr.step-io details[open] pre`)))
	fits = evalJS[bool](t, ctx, "the page's width on a phone", `document.documentElement.scrollWidth <= window.innerWidth`)
	if !fits {
		t.Error("the run page is wider than a phone's screen")
	}
	broken = evalJS[[]string](t, ctx, "the call column on a phone", noMidWordBreak)
	if len(broken) > 0 {
		t.Errorf("names broken mid-word in the Call column on a phone: %q", broken)
	}
	shot("ui-run-io-phone.png")

	// A tool error's attempts are coloured as errors, not as the green of
	// an answer.
	do("the oops run", chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(base+"/runs/"+oops),
		chromedp.WaitVisible(chromedp.CSS(`#run-status.run-failed`)))
	var colours []string
	colours = evalJS[[]string](t, ctx, "the attempts' colours", `Array.from(document.querySelectorAll(".timeline .tl-bar .tl-seg")).map(s => s.className + " " + getComputedStyle(s).backgroundColor)`)
	if len(colours) != 2 {
		t.Fatalf("attempts %q, want 2", colours)
	}
	for _, c := range colours {
		if !strings.Contains(c, "att-tool_error") || !strings.HasSuffix(c, "rgb(239, 108, 0)") {
			t.Errorf("attempt %q: want att-tool_error in the tool error colour, rgb(239, 108, 0)", c)
		}
	}
	broken = evalJS[[]string](t, ctx, "the call column beside a long error", noMidWordBreak)
	if len(broken) > 0 {
		t.Errorf("names broken mid-word in the Call column: %q", broken)
	}
	shot("ui-run-tool-error.png")

	// Cancel the slow run from its page, with a reason: the page says who
	// and why, and does not say it waits for an operator.
	do("the slow run", chromedp.Navigate(base+"/runs/"+slow), chromedp.WaitVisible(chromedp.CSS(`#cancel`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=reason]`), "wrong day"), chromedp.Click(chromedp.CSS(`#cancel`)))
	waitStatus(t, base, slow, "cancelled")
	do("the cancelled run", chromedp.Navigate(base+"/runs/"+slow), chromedp.WaitVisible(chromedp.CSS(`#cancelled`)))
	var callout, page string
	callout = evalJS[string](t, ctx, "the callout", `document.querySelector("#cancelled").textContent`)
	page = evalJS[string](t, ctx, "the page", `document.querySelector("main").textContent`)
	if !strings.Contains(callout, "cancelled by "+osUser()+" in the web UI: wrong day") {
		t.Errorf("the cancelled run's callout %q: want who cancelled it and why", callout)
	}
	if strings.Contains(page, "Waiting for an operator") {
		t.Error("a cancelled run says it waits for an operator")
	}
	shot("ui-run-cancelled.png")

	// The list: a cancelled run is listed as cancelled, not as blocked,
	// and does not count calls to resolve.
	do("the cancelled runs", chromedp.Navigate(base+"/?status=cancelled"), chromedp.WaitVisible(chromedp.CSS(`#run-filter`)))
	if got := listed(); got != slow {
		t.Errorf("cancelled runs: %q, want %s", got, slow)
	}
	page = evalJS[string](t, ctx, "the page", `document.querySelector("main").textContent`)
	if strings.Contains(page, "to resolve") {
		t.Error("the cancelled run is listed with calls to resolve")
	}
	do("the blocked runs", chromedp.Navigate(base+"/?status=blocked"), chromedp.WaitVisible(chromedp.CSS(`#run-filter`)))
	if got := listed(); got != "" {
		t.Errorf("blocked runs: %q, want none", got)
	}

	// Filters, from the form: tool, then server and status, then
	// workflow, then a time range that ends before the runs.
	filter := func(what string, fields map[string]string) string {
		t.Helper()
		// Once the list is live, and has read itself again (ui.js does
		// when its stream opens), the form is filled in: a field changed
		// keeps the list from being swapped under it.
		do(what+": the list", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#live-state.on`)))
		time.Sleep(500 * time.Millisecond)
		var steps []chromedp.Action[chromedp.Void]
		for name, v := range fields {
			steps = append(steps, chromedp.SetValue(chromedp.CSS(`#run-filter [name=`+name+`]`), v))
		}
		// The filtered page offers to clear the filters.
		steps = append(steps, chromedp.Click(chromedp.CSS(`#filter`)), chromedp.WaitVisible(chromedp.CSS(`#run-filter a.clear`)))
		do(what, steps...)
		return listed()
	}
	if got := filter("by tool", map[string]string{"tool": "fail"}); got != oops {
		t.Errorf("tool fail: %q, want %s", got, oops)
	}
	shot("ui-runs-filtered.png")
	if got := filter("by server and status", map[string]string{"server": "payments-ledger-service", "status": "succeeded"}); got != io {
		t.Errorf("server payments-ledger-service, succeeded: %q, want %s", got, io)
	}
	if got := filter("by workflow", map[string]string{"workflow": "slow"}); got != slow {
		t.Errorf("workflow slow: %q, want %s", got, slow)
	}
	if got := filter("by time", map[string]string{"until": time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")}); got != "" {
		t.Errorf("runs started an hour ago or before: %q, want none", got)
	}
	if got := filter("by time", map[string]string{"since": time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04"), "workflow": "io"}); got != io {
		t.Errorf("io runs of the last hour: %q, want %s", got, io)
	}
	t.Logf("screenshots in %s", out)
}

// evalJS evaluates js in the browser's page and returns its value; what
// names it in the error.
func evalJS[T any](t *testing.T, ctx context.Context, what, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// TestBrowserAnswerGoesOn: a run whose server asked a question shows a
// form generated from the question's schema; answering it there journals
// the answer (who: the server's operator) and continues the run, which
// the page follows to its end; each transfer ran once.
func TestBrowserAnswerGoesOn(t *testing.T) {
	chromium := chromiumPath(t)
	out := testOutput(t)
	c := newCLI(t)
	c.workflow("pay.yaml", payWorkflow)
	base := startServer(t, c)
	run := submitFile(t, base, "pay.yaml", nil)
	waitBlocked(t, base, run)
	b := newBrowser(t, chromium)
	shot := b.shot(out)
	b.do("the blocked run", chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(base+"/runs/"+run),
		chromedp.WaitVisible(chromedp.CSS(`#live-state.on`)))
	b.until("the question's form", `(() => { const f = document.querySelector(".questions-pending form.answer"); `+
		`return f !== null && f.querySelector("q.question").textContent === "Transfer 25 to acme?" && `+
		`f.querySelector("select[name='f.confirm']") !== null && f.querySelector("input[name='f.reference']") !== null })()`)
	shot("ui-answer-pending.png")
	b.live("confirm", chromedp.SetValue(chromedp.CSS(`.questions-pending select[name='f.confirm']`), "true"))
	b.live("type the reference", chromedp.SendKeys(chromedp.CSS(`.questions-pending input[name='f.reference']`), "INV-42"))
	b.live("answer", chromedp.Click(chromedp.CSS(`.questions-pending button[value=accept]`)))
	b.do("answered", chromedp.WaitVisible(chromedp.CSS(`.flash-ok`)))
	if got := b.text(".flash-ok"); !strings.Contains(got, "Step pay answered (accept) by") || !strings.Contains(got, "The run goes on.") {
		t.Errorf("flash %q", got)
	}
	b.until("the run succeeded, nothing asks", `document.querySelector("#run-status.run-succeeded") !== null && `+
		`document.querySelector(".questions-pending") === null`)
	shot("ui-answer-done.png")
	if status, steps := apiRun(t, base, run); status != "succeeded" || len(steps) != 2 {
		t.Fatalf("run %s: %s with %d steps", run, status, len(steps))
	}
	rows := c.ledger()
	if len(rows) != 2 || rows[0]["tool"] != "transfer" {
		t.Fatalf("ledger: %v", rows)
	}
	// The invocation's page lists the question and who answered it.
	_, steps := apiRun(t, base, run)
	b.do("the invocation", chromedp.Navigate(base+"/invocations/"+fmt.Sprint(steps[0]["id"])),
		chromedp.WaitVisible(chromedp.CSS(`table.questions`)))
	if got := b.text("table.questions tbody"); !strings.Contains(got, "Transfer 25 to acme?") || !strings.Contains(got, "INV-42") || !strings.Contains(got, "by ") {
		t.Errorf("questions on the invocation page: %q", got)
	}
	shot("ui-answer-invocation.png")
}

// TestBrowserAnswerDuringTheCall: server-everything (npm) asks during the
// call; the run page of the server that runs it shows the question's form
// while the call waits open, and the answer given there reaches the call.
func TestBrowserAnswerDuringTheCall(t *testing.T) {
	chromium := chromiumPath(t)
	out := testOutput(t)
	c := newCLI(t)
	usePinnedNpmServers(t, c)
	c.workflow("ask.yaml", `name: ask
servers:
  everything: {command: npx, args: ["@modelcontextprotocol/server-everything", stdio]}
steps:
  - {id: ask, server: everything, tool: trigger-elicitation-request, timeout: 60s}
`)
	base := startServer(t, c)
	run := submitFile(t, base, "ask.yaml", nil)
	b := newBrowser(t, chromium)
	shot := b.shot(out)
	b.do("the running run", chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(base+"/runs/"+run),
		chromedp.WaitVisible(chromedp.CSS(`#live-state.on`)))
	b.until("the question's form", `(() => { const f = document.querySelector(".questions-pending form.answer"); `+
		`return f !== null && f.querySelector("input[name='f.name']") !== null && f.querySelector("select[name='f.check']") !== null })()`)
	shot("ui-answer-in-call.png")
	b.live("type the name", chromedp.SendKeys(chromedp.CSS(`.questions-pending input[name='f.name']`), "Ada"))
	b.live("answer", chromedp.Click(chromedp.CSS(`.questions-pending button[value=accept]`)))
	b.do("answered", chromedp.WaitVisible(chromedp.CSS(`.flash-ok`)))
	waitStatus(t, base, run, "succeeded")
	_, steps := apiRun(t, base, run)
	if len(steps) != 1 {
		t.Fatalf("%d steps", len(steps))
	}
	res, err := http.Get(base + "/api/invocations/" + fmt.Sprint(steps[0]["id"]) + "?payload=true")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var inv struct {
		Result struct{ Content json.RawMessage } `json:"result"`
		Inputs []struct {
			Answers []struct{ By string } `json:"answers"`
		} `json:"inputs"`
	}
	if err := json.NewDecoder(res.Body).Decode(&inv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(inv.Result.Content), "User provided the requested information") || len(inv.Inputs) != 1 || len(inv.Inputs[0].Answers) != 1 || inv.Inputs[0].Answers[0].By == "" {
		t.Errorf("invocation: result %s, inputs %+v", inv.Result.Content, inv.Inputs)
	}
}
