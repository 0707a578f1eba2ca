package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
)

// waitingKinds are the workflows of BenchmarkWaitingRuns, one for each
// way a run waits for a person: at an approval gate, on a call whose
// outcome is unknown (the demo server answers ledger_append with an
// internal error after its side effect), and on a question the server
// asked (transfer's elicitation, which no elicit: answers). The demo
// server is one process over streamable HTTP (URL is its address).
var waitingKinds = []waitingKind{
	{"gate", `name: gate
servers:
  demo: {url: URL}
steps:
  - {id: deploy, approve: "Deploy?", server: demo, tool: greet, with: {name: x}}
`},
	{"unknown", `name: unknown
servers:
  demo: {url: URL}
steps:
  - {id: charge, server: demo, tool: ledger_append, with: {entry: "charge 10 EUR"}}
`},
	{"question", `name: question
servers:
  demo: {url: URL}
steps:
  - {id: pay, server: demo, tool: transfer, with: {amount: 25, to: acme}}
`},
	// Not in the default list: the same question, asked by ending the call
	// (input_required, protocol 2026-07-28, which the demo server speaks
	// over stdio), the runs sharing four sessions of it.
	{"asked", `name: asked
servers:
  demo: {builtin: demo, sessions: 4}
steps:
  - {id: pay, server: demo, tool: transfer, with: {amount: 25, to: acme}}
`},
}

// defaultKinds is how many of waitingKinds run when
// MCPFLOW_BENCH_WAITING_KINDS names none: gate, unknown, question.
const defaultKinds = 3

type waitingKind struct{ name, source string }

// kindsFrom are the kinds that MCPFLOW_BENCH_WAITING_KINDS names (a comma
// list: gate, unknown, question, asked), or the first three.
func kindsFrom(b *testing.B, list string) []waitingKind {
	if list == "" {
		return waitingKinds[:defaultKinds]
	}
	var out []waitingKind
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(waitingKinds, func(k waitingKind) bool { return k.name == strings.TrimSpace(name) })
		if i < 0 {
			b.Fatalf("MCPFLOW_BENCH_WAITING_KINDS: no kind %q (gate, unknown, question, asked)", name)
		}
		out = append(out, waitingKinds[i])
	}
	return out
}

// BenchmarkWaitingRuns is issue 36's "runs that wait": one `mcpflow
// server` (this test binary as the mcpflow executable, a process of its
// own on a real bbolt file) is handed runs through its socket until
// MCPFLOW_BENCH_WAITING of them (default 1,000) wait — a third at an
// approval gate, a third blocked on a call whose outcome is unknown, a
// third on an unanswered elicitation (MCPFLOW_BENCH_WAITING_KINDS=gate,unknown
// leaves out the runs whose call stays open; =asked has the same question
// asked by ending the call, on protocol 2026-07-28). It prints the server's resident
// memory then (rss-MiB, and its peak, peak-rss-MiB), stops it (SIGTERM)
// and starts it again on the same journal, and prints how long the new
// process took to answer the runs page of its API (restart-s: from exec
// to the first 200 of GET /api/runs?limit=50&count=1), its memory then,
// and how long that page and the web UI's take afterwards (api-runs-ms,
// ui-runs-ms: the median of 20). The goal's figures:
//
//	MCPFLOW_BENCH_WAITING=10000 go test ./cmd/mcpflow -run '^$' -bench WaitingRuns -benchtime 1x
func BenchmarkWaitingRuns(b *testing.B) {
	n := 1000
	if v := os.Getenv("MCPFLOW_BENCH_WAITING"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("MCPFLOW_BENCH_WAITING=%q: want a number of runs", v)
		}
	}
	w := &waitingServer{b: b, workspace: b.TempDir(), config: b.TempDir(), kinds: kindsFrom(b, os.Getenv("MCPFLOW_BENCH_WAITING_KINDS"))}
	if out, err := w.command("trust", "add").CombinedOutput(); err != nil {
		b.Fatalf("trust add: %v\n%s", err, out)
	}
	w.url = w.demo("MCPFLOW_DEMO_FAULT=rpc-error-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append")
	b.ResetTimer()
	for range b.N {
		w.start()
		start := time.Now()
		w.submit(n)
		w.waitBlocked(n)
		b.ReportMetric(time.Since(start).Seconds(), "submit-s")
		time.Sleep(time.Second) // what the runs left behind settles
		rss, peak := w.memory()
		b.ReportMetric(float64(n), "waiting-runs")
		b.ReportMetric(rss, "rss-MiB")
		b.ReportMetric(peak, "peak-rss-MiB")

		w.stop()
		restart := w.start()
		b.ReportMetric(restart.Seconds(), "restart-s")
		rss, _ = w.memory()
		b.ReportMetric(rss, "restart-rss-MiB")
		w.waitSettled(n)
		b.ReportMetric(w.median("/api/runs?limit=50&count=1", `"runs": [`), "api-runs-ms")
		b.ReportMetric(w.median("/", "<table"), "ui-runs-ms")
		w.stop()
	}
}

// waitingServer is BenchmarkWaitingRuns's mcpflow server process.
type waitingServer struct {
	b                 *testing.B
	workspace, config string
	url               string // the demo server's
	kinds             []waitingKind
	cmd               *exec.Cmd
	exited            chan struct{}
	out               *lockedBuffer
	http              *http.Client
}

func (w *waitingServer) command(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		w.b.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"--workspace", w.workspace}, args...)...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1", "NO_COLOR=1", "XDG_CONFIG_HOME="+w.config)
	return cmd
}

// demo starts the demo server over streamable HTTP, with env, and returns
// its URL.
func (w *waitingServer) demo(env ...string) string {
	w.b.Helper()
	cmd := w.command("demo-server", "--http", "127.0.0.1:0")
	cmd.Dir = w.workspace
	cmd.Env = append(cmd.Env, env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		w.b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.b.Fatal(err)
	}
	urls := make(chan string, 1)
	drained := make(chan struct{})
	go func() { // owned by the cleanup below, which waits for it
		defer close(drained)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				urls <- strings.TrimSpace(u)
				break
			}
		}
		io.Copy(io.Discard, pipe)
	}()
	w.b.Cleanup(func() {
		cmd.Process.Kill()
		<-drained
		cmd.Wait()
	})
	select {
	case u := <-urls:
		return u
	case <-time.After(20 * time.Second):
		w.b.Fatal("the demo server never said where it listens")
	}
	return ""
}

func (w *waitingServer) socket() string {
	return filepath.Join(w.workspace, ".mcpflow", "mcpflow.sock")
}

// start starts the server and returns how long it took to answer the
// runs page of its API.
func (w *waitingServer) start() time.Duration {
	w.b.Helper()
	w.out = &lockedBuffer{}
	w.cmd = w.command("server", "--grace", "1s")
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	w.http = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", w.socket())
		},
		MaxIdleConnsPerHost: 16,
	}}
	start := time.Now()
	if err := w.cmd.Start(); err != nil {
		w.b.Fatal(err)
	}
	w.exited = make(chan struct{})
	go func() { // owned by w: stop waits for it
		w.cmd.Wait()
		close(w.exited)
	}()
	w.b.Cleanup(func() {
		w.cmd.Process.Kill()
		<-w.exited
	})
	deadline := start.Add(2 * time.Minute)
	for {
		select {
		case <-w.exited:
			w.b.Fatalf("mcpflow server exited: %s", w.out.String())
		default:
		}
		if resp, err := w.http.Get("http://mcpflow/api/runs?limit=50&count=1"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		if time.Now().After(deadline) {
			w.b.Fatalf("mcpflow server never answered: %s", w.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop stops the server as SIGTERM does.
func (w *waitingServer) stop() {
	w.b.Helper()
	w.http.CloseIdleConnections()
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(time.Minute):
		w.b.Fatalf("mcpflow server did not stop: %s", w.out.String())
	}
	if code := w.cmd.ProcessState.ExitCode(); code != 0 {
		w.b.Fatalf("mcpflow server: exit %d\n%s", code, w.out.String())
	}
}

// submit starts n runs, the kinds in turn, from a few clients at once.
func (w *waitingServer) submit(n int) {
	w.b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				k := w.kinds[i%len(w.kinds)]
				src := strings.ReplaceAll(k.source, "URL", strconv.Quote(w.url))
				body, _ := json.Marshal(api.SubmitRequest{File: k.name + ".yaml", Source: src})
				resp, err := w.http.Post("http://mcpflow/api/runs", "application/json", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					errs <- fmt.Errorf("submit %s: %s: %s", k.name, resp.Status, msg)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		w.b.Fatal(err)
	}
}

// waitBlocked waits until the n runs wait: those at a gate, those whose
// outcome is unknown and those asked a question by a call's end (asked)
// blocked, those asked a question during the call running with
// the question journaled (their call is open: the demo server asked
// during it, as a server before protocol 2026-07-28 does).
func (w *waitingServer) waitBlocked(n int) {
	w.b.Helper()
	asked := 0 // the kinds go in turn
	for i := range n {
		if w.kinds[i%len(w.kinds)].name == "question" {
			asked++
		}
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		blocked, running := w.count("blocked"), w.count("running")
		if blocked == n-asked && running == asked {
			break
		}
		if blocked > n-asked || time.Now().After(deadline) {
			w.b.Fatalf("%d runs blocked, %d running, want %d and %d: %s", blocked, running, n-asked, asked, w.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, k := range w.kinds {
		var list api.RunList
		w.get("/api/runs?limit=1&workflow="+k.name, &list)
		if len(list.Runs) != 1 {
			w.b.Fatalf("no run of %s", k.name)
		}
		if k.name == "question" {
			var rep struct {
				Status      string `json:"status"`
				Invocations []struct {
					Inputs []struct {
						Requests map[string]struct {
							Method string `json:"method"`
						} `json:"requests"`
					} `json:"inputs"`
				} `json:"invocations"`
			}
			w.get("/api/runs/"+list.Runs[0].ID, &rep)
			if rep.Status != "running" || len(rep.Invocations) != 1 || len(rep.Invocations[0].Inputs) != 1 ||
				rep.Invocations[0].Inputs[0].Requests["elicitation-1"].Method != "elicitation/create" {
				w.b.Fatalf("a run of question does not wait for its answer: %+v", rep)
			}
			continue
		}
		want := map[string]string{"gate": "MCPFLOW_APPROVAL_REQUIRED", "unknown": "MCPFLOW_OUTCOME_UNKNOWN", "asked": "MCPFLOW_INPUT_REQUIRED"}[k.name]
		if got := list.Runs[0]; got.Status != "blocked" || got.Error == nil || got.Error.Code != want {
			w.b.Fatalf("a run of %s: %s, error %+v, want blocked with %s", k.name, got.Status, got.Error, want)
		}
	}
}

// waitSettled waits, after a restart, until the n runs are blocked or
// running and the server has done resuming those that were running (the
// calls left open at the stop, which it resumes under the replay rule).
func (w *waitingServer) waitSettled(n int) {
	w.b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	last := -1
	for {
		blocked, running := w.count("blocked"), w.count("running")
		if blocked+running == n && blocked == last {
			return
		}
		if time.Now().After(deadline) {
			w.b.Fatalf("%d runs blocked, %d running, want %d in all: %s", blocked, running, n, w.out.String())
		}
		last = blocked
		time.Sleep(time.Second)
	}
}

// count counts the runs of a status, from the API.
func (w *waitingServer) count(status string) int {
	var list api.RunList
	w.get("/api/runs?limit=1&count=1&status="+status, &list)
	if list.Total == nil {
		w.b.Fatalf("no total in the runs list")
	}
	return list.Total.N
}

func (w *waitingServer) get(path string, v any) {
	w.b.Helper()
	resp, err := w.http.Get("http://mcpflow" + path)
	if err != nil {
		w.b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		w.b.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			w.b.Fatalf("GET %s: %v", path, err)
		}
	}
}

// median is the median time of 20 GETs of path, in milliseconds; each
// answer must hold want.
func (w *waitingServer) median(path, want string) float64 {
	w.b.Helper()
	var ds []time.Duration
	for range 20 {
		start := time.Now()
		resp, err := w.http.Get("http://mcpflow" + path)
		if err != nil {
			w.b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ds = append(ds, time.Since(start))
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(want)) {
			w.b.Fatalf("GET %s: %s: %.300s", path, resp.Status, body)
		}
	}
	return float64(medianOf(ds).Microseconds()) / 1000
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// memory is the server's resident set and its peak, in MiB, from
// /proc/PID/status.
func (w *waitingServer) memory() (rss, peak float64) {
	w.b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", w.cmd.Process.Pid))
	if err != nil {
		w.b.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if name == "VmRSS" {
			rss = kb / 1024
		} else {
			peak = kb / 1024
		}
	}
	return rss, peak
}

// BenchmarkRunsPage is the runs page of issue 36's "runs that wait" on a
// large journal: `mcpflow server` (a process of its own, as in
// BenchmarkWaitingRuns) on a journal of MCPFLOW_BENCH_RUNS runs (default
// 10,000), each with 3 calls — one in ten blocked on a call whose outcome
// is unknown, the rest succeeded — written by `mcpflow journal import`
// from an archive made here. It prints the median of 20 requests, in
// milliseconds, of the API's first page with its total (api-runs-ms),
// its page of blocked runs (api-blocked-ms), a page further on
// (api-older-ms), and the web UI's runs page with its status counts
// (ui-runs-ms). With MCPFLOW_BENCH_RUNS_FIXTURE=DIR the workspace (its
// journal) is built there once and kept. The goal's figures:
//
//	MCPFLOW_BENCH_RUNS=100000 MCPFLOW_BENCH_RUNS_FIXTURE=/tmp/runs100k go test ./cmd/mcpflow -run '^$' -bench RunsPage -benchtime 1x
func BenchmarkRunsPage(b *testing.B) {
	n := 10_000
	if v := os.Getenv("MCPFLOW_BENCH_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			b.Fatalf("MCPFLOW_BENCH_RUNS=%q: want a number of runs, at least 100", v)
		}
	}
	w := &waitingServer{b: b, workspace: b.TempDir(), config: b.TempDir()}
	if dir := os.Getenv("MCPFLOW_BENCH_RUNS_FIXTURE"); dir != "" {
		// The journal records its key, which lives in the configuration
		// directory: both are kept.
		w.workspace, w.config = dir, filepath.Join(dir, ".config")
	}
	journalFile := filepath.Join(w.workspace, ".mcpflow", "journal.db")
	if _, err := os.Stat(journalFile); err != nil {
		if err := os.MkdirAll(w.workspace, 0o700); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		archive := filepath.Join(b.TempDir(), "runs.jsonl")
		if err := writeRunsArchive(archive, n); err != nil {
			b.Fatal(err)
		}
		if out, err := w.command("journal", "import", archive).CombinedOutput(); err != nil {
			b.Fatalf("journal import: %v\n%s", err, out)
		}
		b.Logf("fixture: %d runs, built in %v", n, time.Since(start).Round(time.Millisecond))
	}
	b.ResetTimer()
	for range b.N {
		w.start()
		var list api.RunList
		w.get("/api/runs?limit=50&count=1", &list)
		if len(list.Runs) != 50 || list.Total == nil || list.Total.N < min(n, 10_000) || list.NextCursor == nil {
			b.Fatalf("the first page: %d runs, total %+v", len(list.Runs), list.Total)
		}
		older := "/api/runs?limit=50&cursor=" + list.Runs[len(list.Runs)/2].ID
		b.ReportMetric(float64(n), "runs")
		b.ReportMetric(w.median("/api/runs?limit=50&count=1", `"runs": [`), "api-runs-ms")
		b.ReportMetric(w.median("/api/runs?limit=50&count=1&status=blocked", `"MCPFLOW_OUTCOME_UNKNOWN"`), "api-blocked-ms")
		b.ReportMetric(w.median(older, `"runs": [`), "api-older-ms")
		b.ReportMetric(w.median("/", "<table"), "ui-runs-ms")
		w.stop()
	}
}

// writeRunsArchive writes an archive (as `journal export --archive` writes
// one) of n runs of 3 calls each, a second apart, ending now: one run in
// ten blocked on its last call, whose outcome is unknown; the rest
// succeeded.
func writeRunsArchive(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(bw)
	var g journal.IDGen
	t0 := time.Now().UTC().Add(-time.Duration(n) * time.Second).Truncate(time.Second)
	def := []byte(`{"name":"nightly","servers":{"fs":{"builtin":"demo"}},"steps":[{"id":"read","server":"fs","tool":"read_file"},{"id":"sum","server":"fs","tool":"greet"},{"id":"write","server":"fs","tool":"ledger_append"}]}`)
	steps := []string{"read", "sum", "write"}
	for r := range n {
		at := t0.Add(time.Duration(r) * time.Second)
		blocked := r%10 == 9
		run := journal.Run{ID: g.Next(at), Workflow: "nightly", Definition: def, Digest: journal.Digest(def), Status: journal.RunSucceeded, StartedAt: at}
		var invs []journal.Invocation
		for i, step := range steps {
			sent := at.Add(time.Duration(i+1) * time.Millisecond)
			end := sent.Add(time.Millisecond)
			inv := journal.Invocation{ID: g.Next(sent), RunID: run.ID, Step: step, Item: -1, Server: "fs", Tool: step,
				Arguments: json.RawMessage(`{"path":"/tmp/x","n":1}`), State: journal.StateCompleted,
				Trust:     journal.Trust{Server: true, Workspace: true, WorkspaceSource: "store"},
				Attempts:  []journal.Attempt{{N: 1, SentAt: sent, EndedAt: &end}},
				Result:    &journal.Result{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`)},
				CreatedAt: sent, UpdatedAt: end}
			inv.IdempotencyKey = inv.ID.String()
			if blocked && i == len(steps)-1 {
				inv.State, inv.Result = journal.StateOutcomeUnknown, nil
				inv.Error = &journal.Error{Code: "MCPFLOW_OUTCOME_UNKNOWN", Message: "the outcome is unknown"}
			}
			invs = append(invs, inv)
			run.UpdatedAt = end
		}
		fin := run.UpdatedAt
		run.FinishedAt = &fin
		if blocked {
			run.Status = journal.RunBlocked
			run.Error = &journal.Error{Code: "MCPFLOW_OUTCOME_UNKNOWN", Message: "the outcome is unknown"}
		}
		if err := enc.Encode(map[string]any{"run": run}); err != nil {
			return err
		}
		for _, inv := range invs {
			if err := enc.Encode(map[string]any{"invocation": inv}); err != nil {
				return err
			}
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
