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
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// live does one step on a live page, which swaps its region in when
	// the server reports a change (ui.js): a step that found its node
	// just before the swap finds it gone, and is tried again on the
	// fresh one.
	live := func(what string, step chromedp.Action[chromedp.Void]) {
		t.Helper()
		for try := 0; ; try++ {
			err := chromedp.Do(ctx, step)
			if err == nil {
				return
			}
			if !strings.Contains(err.Error(), "Could not find node") || try == 20 {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(50 * time.Millisecond)
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
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}

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
