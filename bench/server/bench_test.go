package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	runsFlag  = flag.Int("runs", 1000, "concurrent runs submitted to the server (and concurrent bare callers)")
	stepsFlag = flag.Int("steps", 10, "steps of each run (calls of each bare caller)")
	connsFlag = flag.Int("conns", 0, "connections the bare callers share per server (0: the server's own, -server-conns)")
	srvConns  = flag.Int("server-conns", 4, "sessions the server keeps per server (the workspace's `sessions:`); 0 writes no setting (a build before it: one per run)")
	submitter = flag.Int("submitters", 16, "clients submitting the runs at once, each one run after another")
	binFlag   = flag.String("bin", os.Getenv("MCPFLOW_BENCH_BIN"), "the mcpflow binary to measure (default: built from this tree)")
)

// BenchmarkThousandRuns submits -runs runs of a -steps-step workflow to a
// real `mcpflow server` through its HTTP API (the unix socket the CLI
// uses), against the demo server over stdio (a subprocess the server
// starts) and over streamable HTTP (a demo server on loopback), and then
// makes the same calls bare with go-sdk: -runs callers, each making -steps
// calls in turn, over -conns connections. It prints the throughput of
// each, their ratio, and the step overhead at p50 and p99.
func BenchmarkThousandRuns(b *testing.B) {
	for _, tr := range []string{"stdio", "http"} {
		b.Run(tr, func(b *testing.B) {
			for range b.N {
				measure(b, tr, *runsFlag, *stepsFlag)
			}
		})
	}
}

// figures is what one round measured.
type figures struct {
	runs, steps, conns   int
	journaled, bare      time.Duration // wall time of each phase
	stepTimes, bareCalls []time.Duration
	// between are each step's time less its attempt's (from its intent
	// to its answer): the time the run spent between its calls.
	between []time.Duration
	// journal: the journal's commits, writes, seconds in the log's
	// fdatasync, and applies of the log during the runs (/metrics).
	journal                []float64
	submitted              time.Duration // the last run's start was answered
	failed                 int
	serverCPU, serverCores float64
}

func measure(b *testing.B, transport string, runs, steps int) {
	bin := mcpflowBinary(b)
	dir := b.TempDir()
	ws := filepath.Join(dir, "ws")
	home := filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	conns := *connsFlag
	if conns == 0 {
		conns = *srvConns
	}
	if conns == 0 {
		conns = runs
	}

	// The demo server: the same binary, ledger off (its fsync and its
	// re-read of the whole ledger on every call would measure the demo).
	demoBin := demoBinary(b)
	var server string
	var httpURL string
	switch transport {
	case "stdio":
		server = fmt.Sprintf("    command: %s\n    args: [demo-server, --no-ledger]\n", demoBin)
	case "http":
		httpURL = startDemoHTTP(b, demoBin, dir)
		server = fmt.Sprintf("    url: %s\n", httpURL)
	}
	if *srvConns > 0 {
		server += fmt.Sprintf("    sessions: %d\n", *srvConns)
	}
	var wf strings.Builder
	fmt.Fprintf(&wf, "name: bench\ninputs:\n  name: {type: string, default: world}\nservers:\n  demo:\n%ssteps:\n", server)
	for i := range steps {
		fmt.Fprintf(&wf, "  - id: s%d\n    server: demo\n    tool: greet\n    with: {name: \"${{ inputs.name }}\"}\n", i)
	}
	if err := os.WriteFile(filepath.Join(ws, "bench.yaml"), []byte(wf.String()), 0o600); err != nil {
		b.Fatal(err)
	}

	f := figures{runs: runs, steps: steps, conns: conns}
	b.StopTimer()
	journaledPhase(b, bin, ws, home, &f)
	barePhase(b, transport, demoBin, httpURL, conns, &f)
	report(b, transport, &f)
}

// journaledPhase starts `mcpflow server` in ws, submits the runs, waits for
// each to finish, and reads every step's times from the API.
func journaledPhase(b *testing.B, bin, ws, home string, f *figures) {
	cmd := exec.Command(bin, "server", "--workspace", ws, "--grace", "1s")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		// Any server process left behind in the group goes too.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	defer stop()
	sock := filepath.Join(ws, ".mcpflow", "mcpflow.sock")
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: max(64, *submitter),
	}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := c.Get("http://mcpflow/api/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("server did not answer: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	before := scrape(b, c)
	ids := make([]string, f.runs)
	body := []byte(`{"file":"bench.yaml"}`)
	start := time.Now()
	var next atomic.Int64
	var submit sync.WaitGroup
	var submitErr atomic.Value
	for range *submitter {
		submit.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= f.runs {
					return
				}
				resp, err := c.Post("http://mcpflow/api/runs", "application/json", bytes.NewReader(body))
				if err != nil {
					submitErr.Store(err)
					return
				}
				var started struct{ Run string }
				err = json.NewDecoder(resp.Body).Decode(&started)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusAccepted {
					submitErr.Store(fmt.Errorf("submit: status %d: %v", resp.StatusCode, err))
					return
				}
				ids[i] = started.Run
			}
		})
	}
	submit.Wait()
	f.submitted = time.Since(start)
	if err, _ := submitErr.Load().(error); err != nil {
		b.Fatalf("%v\n%s", err, out.String())
	}
	// Wait for the runs to end, asking the server now and then (the
	// event stream drops a follower that falls behind, as one does when a
	// thousand runs start at once); the phase ends with the last run's
	// end as the journal has it.
	deadline = time.Now().Add(30 * time.Minute)
	for {
		var list struct {
			Runs []struct{ ID string } `json:"runs"`
		}
		get(b, c, "/api/runs?status=running&limit=1", &list)
		if len(list.Runs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("runs did not finish\n%s", out.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
	end := start
	cpu := serverCPU(cmd.Process.Pid)
	after := scrape(b, c)
	for _, m := range []string{"mcpflow_journal_commits_total", "mcpflow_journal_writes_total", "mcpflow_journal_log_sync_seconds_total", "mcpflow_journal_log_applies_total"} {
		f.journal = append(f.journal, after[m]-before[m])
	}

	// Every step's time, as the run saw it: from the previous step's end
	// (the run's start for the first) to its own.
	for _, id := range ids {
		var run struct {
			Status      string       `json:"status"`
			StartedAt   time.Time    `json:"started_at"`
			FinishedAt  time.Time    `json:"finished_at"`
			Invocations []invocation `json:"invocations"`
		}
		get(b, c, "/api/runs/"+id, &run)
		if run.Status != "succeeded" || len(run.Invocations) != f.steps {
			f.failed++
			continue
		}
		slices.SortFunc(run.Invocations, func(x, y invocation) int {
			return x.CreatedAt.Compare(y.CreatedAt)
		})
		if run.FinishedAt.After(end) {
			end = run.FinishedAt
		}
		prev := run.StartedAt
		for _, s := range run.Invocations {
			step := s.UpdatedAt.Sub(prev)
			f.stepTimes = append(f.stepTimes, step)
			if len(s.Attempts) == 1 && s.Attempts[0].EndedAt != nil {
				f.between = append(f.between, step-s.Attempts[0].EndedAt.Sub(s.Attempts[0].SentAt))
			}
			prev = s.UpdatedAt
		}
	}
	f.journaled = end.Sub(start)
	f.serverCPU = cpu.Seconds()
	f.serverCores = cpu.Seconds() / f.journaled.Seconds()
	if f.failed > 0 {
		b.Errorf("%d of %d runs did not succeed with %d steps", f.failed, f.runs, f.steps)
	}
	stop()
}

// invocation is what the benchmark reads of a step's invocation.
type invocation struct {
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Attempts  []struct {
		SentAt  time.Time  `json:"sent_at"`
		EndedAt *time.Time `json:"ended_at"`
	} `json:"attempts"`
}

// scrape reads the server's counters from /metrics.
func scrape(b *testing.B, c *http.Client) map[string]float64 {
	resp, err := c.Get("http://mcpflow/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		var x float64
		if _, err := fmt.Sscan(v, &x); err == nil {
			m[name] = x
		}
	}
	return m
}

func get(b *testing.B, c *http.Client, path string, v any) {
	resp, err := c.Get("http://mcpflow" + path)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("GET %s: %d %s", path, resp.StatusCode, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		b.Fatal(err)
	}
}

// serverCPU is the user and system time the server's process and its
// waited-for children have used (from /proc; 0 where there is none).
func serverCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: utime is the 12th.
	i := bytes.LastIndexByte(data, ')')
	fs := strings.Fields(string(data[i+2:]))
	var ut, st int64
	fmt.Sscan(fs[11], &ut)
	fmt.Sscan(fs[12], &st)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// barePhase makes the same calls with go-sdk: f.runs callers, each making
// f.steps calls of greet in turn, over conns sessions (caller i uses
// session i mod conns).
func barePhase(b *testing.B, transport, demoBin, httpURL string, conns int, f *figures) {
	ctx := context.Background()
	sessions := make([]*mcp.ClientSession, conns)
	var connect sync.WaitGroup
	var connectErr atomic.Value
	sem := make(chan struct{}, 16)
	for i := range sessions {
		connect.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var t mcp.Transport
			switch transport {
			case "stdio":
				cmd := exec.Command(demoBin, "demo-server", "--no-ledger")
				cmd.Dir = b.TempDir()
				t = &mcp.CommandTransport{Command: cmd}
			case "http":
				// A client of the session's own, keeping as many idle
				// connections as mcpflow's sessions do: a POST that finds
				// none opens a new TCP connection.
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.MaxIdleConns, tr.MaxIdleConnsPerHost = idleConns, idleConns
				t = &mcp.StreamableClientTransport{Endpoint: httpURL, HTTPClient: &http.Client{Transport: tr}}
			}
			cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			s, err := cl.Connect(ctx, t, nil)
			if err != nil {
				connectErr.Store(err)
				return
			}
			sessions[i] = s
		})
	}
	connect.Wait()
	defer func() {
		var closing sync.WaitGroup
		for _, s := range sessions {
			if s != nil {
				closing.Go(func() { s.Close() })
			}
		}
		closing.Wait()
	}()
	if err, _ := connectErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	// One call on each session first, as a run's session has listed its
	// tools before its first call.
	for _, s := range sessions {
		if _, err := s.ListTools(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	times := make([][]time.Duration, f.runs)
	var callErr atomic.Value
	var callers sync.WaitGroup
	start := time.Now()
	for i := range f.runs {
		callers.Go(func() {
			s := sessions[i%conns]
			ts := make([]time.Duration, 0, f.steps)
			for range f.steps {
				t0 := time.Now()
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "world"}})
				if err != nil || res.IsError {
					callErr.Store(fmt.Errorf("bare call: %v", err))
					return
				}
				ts = append(ts, time.Since(t0))
			}
			times[i] = ts
		})
	}
	callers.Wait()
	f.bare = time.Since(start)
	if err, _ := callErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	for _, ts := range times {
		f.bareCalls = append(f.bareCalls, ts...)
	}
}

// idleConns is upstream's httpIdleConns.
const idleConns = 256

func report(b *testing.B, transport string, f *figures) {
	total := float64(f.runs * f.steps)
	stepsPerSec := total / f.journaled.Seconds()
	callsPerSec := total / f.bare.Seconds()
	slices.Sort(f.stepTimes)
	slices.Sort(f.bareCalls)
	slices.Sort(f.between)
	q := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		return ds[min(len(ds)-1, int(p*float64(len(ds))))]
	}
	p50, p99 := q(f.stepTimes, 0.50), q(f.stepTimes, 0.99)
	b50, b99 := q(f.bareCalls, 0.50), q(f.bareCalls, 0.99)
	o50, o99 := q(f.between, 0.50), q(f.between, 0.99)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(stepsPerSec, "steps/s")
	b.ReportMetric(callsPerSec, "bare-calls/s")
	b.ReportMetric(stepsPerSec/callsPerSec, "ratio")
	b.ReportMetric(ms(p50-b50), "p50-overhead-ms")
	b.ReportMetric(ms(p99-b99), "p99-overhead-ms")
	b.ReportMetric(f.serverCores, "server-cores")
	b.Logf("%s: %d runs × %d steps; bare over %d connections\n"+
		"  journaled: %.0f steps/s (%.2f s, the last run submitted at %.2f s); step p50 %.1f ms, p99 %.1f ms; server CPU %.1f s (%.2f cores)\n"+
		"  bare:      %.0f calls/s (%.2f s); call p50 %.1f ms, p99 %.1f ms\n"+
		"  ratio %.3f; step overhead (step less bare call, at each quantile) p50 %.1f ms, p99 %.1f ms\n"+
		"  a step's time less its attempt's (intent to answer): p50 %.2f ms, p99 %.2f ms\n"+
		"  journal: %.0f commits (%.1f writes each), log fdatasync %.1f s, %.0f applies",
		transport, f.runs, f.steps, f.conns,
		stepsPerSec, f.journaled.Seconds(), f.submitted.Seconds(), ms(p50), ms(p99), f.serverCPU, f.serverCores,
		callsPerSec, f.bare.Seconds(), ms(b50), ms(b99),
		stepsPerSec/callsPerSec, ms(p50-b50), ms(p99-b99), ms(o50), ms(o99),
		f.journal[0], f.journal[1]/max(f.journal[0], 1), f.journal[2], f.journal[3])
}

// startDemoHTTP starts the demo server on a free loopback port and returns
// its streamable HTTP endpoint. It is stopped when b ends.
func startDemoHTTP(b *testing.B, demoBin, dir string) string {
	cmd := exec.Command(demoBin, "demo-server", "--no-ledger", "--http", "127.0.0.1:0")
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			go io.Copy(io.Discard, stderr) // owned by cmd: ends when it exits
			return u
		}
	}
	b.Fatalf("demo server did not listen: %v", sc.Err())
	return ""
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// demoBinary is mcpflow built from this tree: its demo server has
// --no-ledger, whichever mcpflow is measured.
func demoBinary(b *testing.B) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpflow-bench-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "mcpflow")
		cmd := exec.Command("go", "build", "-o", built, "./cmd/mcpflow")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return built
}

// mcpflowBinary is the mcpflow to measure: -bin, or this tree's.
func mcpflowBinary(b *testing.B) string {
	if *binFlag != "" {
		return *binFlag
	}
	return demoBinary(b)
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if built != "" {
		os.RemoveAll(filepath.Dir(built))
	}
	os.Exit(code)
}
