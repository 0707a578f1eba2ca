package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/gcpolicy"
	"github.com/mcpflow/mcpflow/internal/ndjson"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// BenchmarkStepCost prints, from one process, the figures of the
// performance table in docs/performance.md: what a journaled step costs beyond the
// bare tools/call (a step's client connection is a stdio server's, the
// bare call's go-sdk's own: see connectStdioTB), in units of one fsync measured in the same run (back to
// back, and paced: each after a bare tools/call, as a step's is), the bare
// call back to back and paced (after an fsync, as a step's is), and the
// throughput of 64 concurrent runs against 64 bare callers. A bare call
// is timed as a step is: a step is its run's time over its 20 steps, a
// bare call 20 calls' time over 20, the median of 5 such batches
// (bare-single-µs is the median of 100 single calls, and
// (step-single)/fsync the ratio with it). Each iteration is one
// interleaved round (fsyncs, bare calls, a 20-step run, 64 concurrent
// 10-step runs and the apply of their log to the file, 64 concurrent bare
// callers); the figures are medians over the rounds. The 20-step run's
// time leaves out the apply of its log, which the next phase forces
// untimed (beside a lone run, the applier has a core of its own); the
// 64 runs' time includes theirs. The two concurrent phases are also
// given in CPU time and cores kept busy, and the runs' phase in the cores
// their log's flushes held (64-runs-sync-cores). The 20-step run's time
// is also split where it is spent, a step's share of each (inStep): its
// commits (step-commit-µs, the log's fdatasync within them
// step-commit-sync-µs), its calls (step-call-µs) and the rest
// (step-rest-µs); floor-(step-bare)/fsync is what a step of nothing but a
// paced flush and a paced call would score. The process has the GC targets of the mcpflow
// binary (internal/gcpolicy; GOGC=100 in the environment gives Go's
// default instead). Run it with:
//
//	go test ./engine -run '^$' -bench StepCost -benchtime 10x
func BenchmarkStepCost(b *testing.B) {
	gcTargets(b)
	dir := b.TempDir()
	// The 20-step run's commits and calls, each timed where it happens
	// (journal.Options.OnCommit, Engine.Called): what its step is made of.
	var inRun inStep
	j := journaltest.OpenPath(b, filepath.Join(dir, "journal.db"), &journal.Options{OnCommit: inRun.commit})
	srv := benchServer()
	// The runs' sessions connect as a stdio server's do (connectStdioTB),
	// the bare callers' through go-sdk alone.
	sess := cachedSession{connectStdioTB(b, srv), map[string]upstream.Tool{}}
	bareSess := cachedSession{connectMemTB(b, srv), map[string]upstream.Tool{}}
	callers, bareCallers := make([]cachedSession, 64), make([]cachedSession, 64)
	for i := range callers {
		callers[i] = cachedSession{connectStdioTB(b, srv), map[string]upstream.Tool{}}
		bareCallers[i] = cachedSession{connectMemTB(b, srv), map[string]upstream.Tool{}}
	}
	wf20, wf10 := loadB(b, chain(20)), loadB(b, chain(10))
	eng := newEngine(j, sess)
	eng.Called = inRun.call
	ctx := context.Background()
	f, err := os.Create(filepath.Join(dir, "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	fsync := func() { // of 4 KiB (fdatasync, as bbolt does)
		f.WriteAt(page, 0)
		f.Sync()
	}

	var fsyncs, paced, bares, singles, pacedBares, steps, ratios, singleRatios, pacedRatios, floors, concurrent []float64
	var stepCommits, stepSyncs, stepCalls, stepRests []float64
	var runCPU, bareCPU, runCores, bareCores, runSync []float64
	commits, pages, stepsRun := int64(0), int64(0), 0
	for b.Loop() {
		// One fsync of 4 KiB.
		fsyncs = append(fsyncs, median(20, fsync))
		// The same fsync when it follows a bare tools/call, as a step's
		// commit does: this disk flushes back-to-back writes faster than
		// one that comes after a pause (see docs/performance.md).
		paced = append(paced, medianOf(20, func() time.Duration {
			if err := bareCall(ctx, bareSess); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			fsync()
			return time.Since(start)
		}))
		// One bare tools/call on the same in-memory server, timed as a
		// step is: 20 calls back to back over 20, as a step is its
		// 20-step run's time over 20. The collections that the calls'
		// garbage brings are then in both figures; the median of single
		// calls (bare-single-µs) leaves most of them out, and put their
		// cost on the step.
		bares = append(bares, medianOf(5, func() time.Duration {
			start := time.Now()
			for range 20 {
				if err := bareCall(ctx, bareSess); err != nil {
					b.Fatal(err)
				}
			}
			return time.Since(start) / 20
		}))
		singles = append(singles, median(100, func() {
			if err := bareCall(ctx, bareSess); err != nil {
				b.Fatal(err)
			}
		}))
		// The same call when it follows an fsync, as a step's call follows
		// its commit: the threads that went idle meanwhile are woken first.
		pacedBares = append(pacedBares, medianOf(20, func() time.Duration {
			fsync()
			start := time.Now()
			if err := bareCall(ctx, bareSess); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		}))
		// One step of a 20-step run.
		st0 := j.Stats()
		c0, p0, s0 := st0.Commits, st0.Pages, st0.LogSync
		inRun.start()
		start := time.Now()
		if run, err := eng.Run(ctx, wf20, map[string]any{}, ""); err != nil || run.Status != journal.RunSucceeded {
			b.Fatalf("run: %v %v", err, run)
		}
		steps = append(steps, float64(time.Since(start).Microseconds())/20)
		commit, call := inRun.stop()
		stepCommits, stepCalls = append(stepCommits, commit/20), append(stepCalls, call/20)
		stepRests = append(stepRests, steps[len(steps)-1]-(commit+call)/20)
		stepSyncs = append(stepSyncs, float64((j.Stats().LogSync-s0).Microseconds())/20)
		commits += j.Stats().Commits - c0
		j.Invocations(journal.Filter{Limit: 1}) // the log applied to the file: its pages count too
		pages += j.Stats().Pages - p0
		stepsRun += 20
		ratios = append(ratios, (steps[len(steps)-1]-bares[len(bares)-1])/fsyncs[len(fsyncs)-1])
		pacedRatios = append(pacedRatios, (steps[len(steps)-1]-bares[len(bares)-1])/paced[len(paced)-1])
		singleRatios = append(singleRatios, (steps[len(steps)-1]-singles[len(singles)-1])/fsyncs[len(fsyncs)-1])
		// What a step made of nothing but its flush (after a call) and its
		// call (after a flush) would score: the lowest (step-bare)/fsync
		// this machine allows without sending a call before its intent
		// is durable.
		floors = append(floors, (paced[len(paced)-1]+pacedBares[len(pacedBares)-1]-bares[len(bares)-1])/fsyncs[len(fsyncs)-1])
		// 64 concurrent 10-step runs against 64 concurrent callers of 10
		// bare calls each: steps per second over calls per second.
		// The runs' time includes applying what they logged to the file:
		// left to the applier's timer, the rest of it would run during the
		// bare callers' turn, on their time.
		start, cpu0, sync0 := time.Now(), cpuTime(), j.Stats().LogSync
		parallel(64, func(i int) {
			e := newEngine(j, callers[i])
			if run, err := e.Run(ctx, wf10, map[string]any{}, ""); err != nil || run.Status != journal.RunSucceeded {
				b.Errorf("run: %v %v", err, run)
			}
		})
		j.Invocations(journal.Filter{Limit: 1})
		journaled, cpu1, sync1 := time.Since(start), cpuTime(), j.Stats().LogSync
		bare := parallel(64, func(i int) {
			for range 10 {
				if err := bareCall(ctx, bareCallers[i]); err != nil {
					b.Error(err)
				}
			}
		})
		cpu2 := cpuTime()
		concurrent = append(concurrent, bare.Seconds()/journaled.Seconds())
		// The same phases in CPU time, which the host's load moves less
		// than wall time: the ratio splits into the CPU a step costs and
		// how many cores each phase kept busy; and the runs' share of
		// the phase with a flush of the log in progress, during which Go
		// keeps a core for the goroutine in fdatasync.
		runSync = append(runSync, (sync1-sync0).Seconds()/journaled.Seconds())
		const calls = 64 * 10 // the 64 runs' steps, the 64 bare callers' calls
		runCPU = append(runCPU, float64((cpu1-cpu0).Microseconds())/calls)
		bareCPU = append(bareCPU, float64((cpu2-cpu1).Microseconds())/calls)
		runCores = append(runCores, (cpu1-cpu0).Seconds()/journaled.Seconds())
		bareCores = append(bareCores, (cpu2-cpu1).Seconds()/bare.Seconds())
	}
	b.ReportMetric(med(fsyncs), "fsync-µs")
	b.ReportMetric(med(paced), "paced-fsync-µs")
	b.ReportMetric(med(pacedRatios), "(step-bare)/paced-fsync")
	b.ReportMetric(med(bares), "bare-call-µs")
	b.ReportMetric(med(singles), "bare-single-µs")
	b.ReportMetric(med(singleRatios), "(step-single)/fsync")
	b.ReportMetric(med(pacedBares), "paced-bare-call-µs")
	b.ReportMetric(med(steps), "step-µs")
	b.ReportMetric(med(ratios), "(step-bare)/fsync")
	b.ReportMetric(med(floors), "floor-(step-bare)/fsync")
	b.ReportMetric(med(stepCommits), "step-commit-µs")
	b.ReportMetric(med(stepSyncs), "step-commit-sync-µs")
	b.ReportMetric(med(stepCalls), "step-call-µs")
	b.ReportMetric(med(stepRests), "step-rest-µs")
	b.ReportMetric(med(concurrent), "64-runs/64-bare")
	b.ReportMetric(med(runSync), "64-runs-sync-cores")
	if med(runCPU) > 0 {
		b.ReportMetric(med(runCPU), "64-runs-cpu-µs/step")
		b.ReportMetric(med(bareCPU), "64-bare-cpu-µs/call")
		b.ReportMetric(med(runCores), "64-runs-cores")
		b.ReportMetric(med(bareCores), "64-bare-cores")
	}
	b.ReportMetric(float64(commits)/float64(stepsRun), "commits/step")
	b.ReportMetric(float64(pages)/float64(stepsRun), "pages/step")
}

// inStep adds up the commits and the calls of one run while it is
// started: journal.Options.OnCommit and Engine.Called.
type inStep struct {
	mu             sync.Mutex
	on             bool
	commits, calls time.Duration
}

func (s *inStep) commit(c journal.Commit) {
	s.mu.Lock()
	if s.on {
		s.commits += c.Duration
	}
	s.mu.Unlock()
}

func (s *inStep) call(_, _ string, d time.Duration) {
	s.mu.Lock()
	if s.on {
		s.calls += d
	}
	s.mu.Unlock()
}

func (s *inStep) start() {
	s.mu.Lock()
	s.on, s.commits, s.calls = true, 0, 0
	s.mu.Unlock()
}

// stop ends the collection and returns the time the commits and the calls
// took, in µs, in all.
func (s *inStep) stop() (commits, calls float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	return float64(s.commits.Nanoseconds()) / 1e3, float64(s.calls.Nanoseconds()) / 1e3
}

// bareCall is one tools/call of the bench server's tool, straight through
// go-sdk.
func bareCall(ctx context.Context, s cachedSession) error {
	_, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "t", Arguments: map[string]any{"n": 1}})
	return err
}

// BenchmarkStepAllocs prints what a step of a 20-step run allocates
// beyond its bare tools/call: mcpflow's own work per step (the journal's
// records, the log, the expressions, the result), in figures the machine's
// noise does not move. Each iteration is one 20-step run, the log applied
// to the file (that counts as the steps' work), and 20 bare calls; the
// figures are totals over all of them. The bare calls go through the
// run's session, a stdio server's client connection (connectStdioTB), so
// B/bare-call is what a call allocates there, client and in-process
// server together. Run it with:
//
//	go test ./engine -run '^$' -bench StepAllocs -benchtime 200x
func BenchmarkStepAllocs(b *testing.B) {
	j := journaltest.Open(b, nil)
	sess := cachedSession{connectStdioTB(b, benchServer()), map[string]upstream.Tool{}}
	eng := newEngine(j, sess)
	wf20 := loadB(b, chain(20))
	ctx := context.Background()
	var step, bare allocCount
	for b.Loop() {
		a0 := allocs()
		if run, err := eng.Run(ctx, wf20, map[string]any{}, ""); err != nil || run.Status != journal.RunSucceeded {
			b.Fatalf("run: %v %v", err, run)
		}
		j.Invocations(journal.Filter{Limit: 1}) // the log applied to the file: the step's work too
		a1 := allocs()
		for range 20 {
			if err := bareCall(ctx, sess); err != nil {
				b.Fatal(err)
			}
		}
		a2 := allocs()
		step, bare = step.add(a1.sub(a0)), bare.add(a2.sub(a1))
	}
	n := float64(20 * b.N)
	b.ReportMetric((step.objects-bare.objects)/n, "allocs/step-beyond-call")
	b.ReportMetric((step.bytes-bare.bytes)/n, "B/step-beyond-call")
	b.ReportMetric(bare.objects/n, "allocs/bare-call")
	b.ReportMetric(bare.bytes/n, "B/bare-call")
}

// allocCount is what the process allocated: so far, or in a span.
type allocCount struct{ objects, bytes float64 }

// allocs reads the counts as testing's ReportAllocs does: exact, where
// runtime/metrics' lag behind what the Ps have not handed in yet.
func allocs() allocCount {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return allocCount{float64(m.Mallocs), float64(m.TotalAlloc)}
}

func (a allocCount) sub(b allocCount) allocCount {
	return allocCount{a.objects - b.objects, a.bytes - b.bytes}
}
func (a allocCount) add(b allocCount) allocCount {
	return allocCount{a.objects + b.objects, a.bytes + b.bytes}
}

// BenchmarkLongRun compares the per-step cost of a 200-step run with a
// 5-step run's (the ratio should stay near 1: nothing grows with the run).
func BenchmarkLongRun(b *testing.B) {
	gcTargets(b)
	j := journaltest.Open(b, nil)
	sess := cachedSession{connectMemTB(b, benchServer()), map[string]upstream.Tool{}}
	eng := newEngine(j, sess)
	wf5, wf200 := loadB(b, chain(5)), loadB(b, chain(200))
	var short, long []float64
	for b.Loop() {
		for _, c := range []struct {
			wf    *workflow.Workflow
			n     int
			times *[]float64
		}{{wf5, 5, &short}, {wf200, 200, &long}} {
			start := time.Now()
			if run, err := eng.Run(context.Background(), c.wf, map[string]any{}, ""); err != nil || run.Status != journal.RunSucceeded {
				b.Fatalf("run: %v %v", err, run)
			}
			*c.times = append(*c.times, float64(time.Since(start).Microseconds())/float64(c.n))
		}
	}
	b.ReportMetric(med(short), "5-step-µs/step")
	b.ReportMetric(med(long), "200-step-µs/step")
	b.ReportMetric(med(long)/med(short), "200/5")
}

// gcTargets gives the benchmark the mcpflow binary's GC targets, and
// reports the one in force.
func gcTargets(b *testing.B) {
	gcpolicy.Apply()
	percent := debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	b.Cleanup(func() { b.ReportMetric(float64(percent), "GOGC") })
}

// chain is a workflow of n steps, each using the previous step's result.
func chain(n int) string {
	var s strings.Builder
	s.WriteString("name: chain\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: s0, server: s, tool: t, with: {n: 1}}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&s, "  - {id: s%d, server: s, tool: t, with: {n: \"${{ steps.s%d.structuredContent.n + 1 }}\"}}\n", i, i-1)
	}
	return s.String()
}

// connectStdioTB connects a client to srv over an in-memory pipe, the
// client's end as mcpflow connects to a stdio server (ndjson's connection,
// as upstream's stdio sessions use) and the server's as
// mcp.NewInMemoryTransports makes it.
func connectStdioTB(t testing.TB, srv *mcp.Server) memSession {
	t.Helper()
	c, s := net.Pipe()
	ss, err := srv.Connect(context.Background(), &mcp.IOTransport{Reader: s, Writer: s}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &ndjson.Transport{Reader: c, Writer: c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return memSession{cs}
}

// benchServer has one tool, t, that answers {n} with {n} (and says so in
// text).
func benchServer() *mcp.Server { return slowServer(0) }

// cachedSession lists a server's tools once, as upstream.Session does.
type cachedSession struct {
	memSession
	tools map[string]upstream.Tool
}

func (s cachedSession) Tool(ctx context.Context, name string) (upstream.Tool, error) {
	if t, ok := s.tools[name]; ok {
		return t, nil
	}
	t, err := s.memSession.Tool(ctx, name)
	if err == nil {
		s.tools[name] = t
	}
	return t, err
}

var _ engine.Session = cachedSession{}

// median runs fn n times and returns the median duration in µs.
func median(n int, fn func()) float64 {
	d := make([]float64, n)
	for i := range d {
		start := time.Now()
		fn()
		d[i] = float64(time.Since(start).Nanoseconds()) / 1e3
	}
	return med(d)
}

// medianOf runs fn n times and returns the median of the durations it
// reports, in µs.
func medianOf(n int, fn func() time.Duration) float64 {
	d := make([]float64, n)
	for i := range d {
		d[i] = float64(fn().Nanoseconds()) / 1e3
	}
	return med(d)
}

func med(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// parallel runs fn(0..n-1) at once and returns how long they all took.
func parallel(n int, fn func(i int)) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkFlushes prints how many flushes (fdatasync) a 20-step run
// costs a step, from its journal's open to its close as `mcpflow run`
// makes them: the log's appends (one flush each) and the commits of the
// log into the bbolt file (two each), with a tool that answers at once
// and with one that takes 30 ms, as tools that do real work do. A flush
// of the file that bbolt makes when it grows the file is not counted
// (strace counts it: see docs/performance.md). Run it with:
//
//	go test ./engine -run '^$' -bench Flushes -benchtime 3x
func BenchmarkFlushes(b *testing.B) {
	for _, c := range []struct {
		name string
		wait time.Duration
	}{{"instant", 0}, {"30ms", 30 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			sess := cachedSession{connectMemTB(b, slowServer(c.wait)), map[string]upstream.Tool{}}
			wf := loadB(b, chain(20))
			var logs, applies int64
			for b.Loop() {
				j, err := bolt.Open(filepath.Join(b.TempDir(), "journal.db"), nil)
				if err != nil {
					b.Fatal(err)
				}
				if run, err := newEngine(j, sess).Run(context.Background(), wf, map[string]any{}, ""); err != nil || run.Status != journal.RunSucceeded {
					b.Fatalf("run: %v %v", err, run)
				}
				if err := j.Close(); err != nil {
					b.Fatal(err)
				}
				st := j.Stats()
				logs, applies = logs+st.Commits, applies+st.Applies
			}
			n := float64(20 * b.N)
			b.ReportMetric(float64(logs)/n, "log-flushes/step")
			b.ReportMetric(float64(2*applies)/n, "file-flushes/step")
			b.ReportMetric(float64(logs+2*applies)/n, "flushes/step")
		})
	}
}

// slowServer is benchServer whose tool takes d to answer.
func slowServer(d time.Duration) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if d > 0 {
				time.Sleep(d)
			}
			var in struct{ N int }
			json.Unmarshal(req.Params.Arguments, &in)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.N)}}, StructuredContent: map[string]any{"n": in.N}}, nil
		})
	return srv
}
