// Package dbosbench compares what a durable step costs in mcpflow, on its
// PostgreSQL journal, with what it costs in DBOS Transact Go, on the same
// database, in the same process and run. It is a module of its own so that
// mcpflow never depends on DBOS.
package dbosbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/gcpolicy"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/postgres"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// steps is the length of the workflow both engines run: long enough that
// a run's own records (start, end) weigh little per step.
const steps = 20

// BenchmarkStepOverhead prints, from one process, the per-step cost of a
// 20-step workflow in mcpflow and in DBOS, each calling the same trivial
// tool on an in-memory MCP server, and the cost of that call alone. Each
// iteration is one round (bare calls, one mcpflow run, one DBOS run, the
// two runs in alternating order so neither always goes first); the
// figures are medians over the rounds. mcpflow's step is also split where
// it is spent, a step's share of each: its commits (mcpflow-commit-µs), its
// calls (mcpflow-call-µs) and the rest (mcpflow-rest-µs). Run it with:
//
//	MCPFLOW_TEST_POSTGRES=postgres://... go test -run '^$' -bench StepOverhead -benchtime 20x
func BenchmarkStepOverhead(b *testing.B) {
	base := os.Getenv("MCPFLOW_TEST_POSTGRES")
	if base == "" {
		b.Skip("no PostgreSQL: set MCPFLOW_TEST_POSTGRES=postgres://USER:PASSWORD@127.0.0.1:5432/DB to run this benchmark")
	}
	// The process has the GC target of the mcpflow binary (GOGC=100 in
	// the environment gives Go's default instead); DBOS, in the same
	// process, has it too.
	gcpolicy.Apply()
	percent := debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	b.Cleanup(func() { b.ReportMetric(float64(percent), "GOGC") })
	ctx := context.Background()
	cs := connect(b, benchServer())
	call := func(ctx context.Context, n int) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "t", Arguments: map[string]any{"n": n}})
	}

	// mcpflow, its journal in a schema of its own.
	// Its commits and calls, timed where they happen (journal.Options.OnCommit,
	// Engine.Called): what its step is made of.
	var inRun inStep
	j, err := postgres.Open(ctx, withSearchPath(b, base, schema(b, base, "mcpflow")), &journal.Options{OnCommit: inRun.commit})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	eng := &engine.Engine{
		Journal:   j,
		Connect:   func(context.Context, string) (engine.Session, error) { return memSession{cs}, nil },
		Reconnect: func(context.Context, string, engine.Session) (engine.Session, error) { return memSession{cs}, nil },
		Trust:     func(string) journal.Trust { return journal.Trust{} },
		Called:    inRun.call,
	}
	wf, err := workflow.Load("chain.yaml", []byte(chain(steps)), nil)
	if err != nil {
		b.Fatal(err)
	}
	var commits, calls, rests []float64
	runMCPFlow := func() {
		inRun.start()
		if run, err := eng.Run(ctx, wf, map[string]any{}, ""); err != nil || run.Status != journal.RunSucceeded {
			b.Fatalf("mcpflow run: %v %v", err, run)
		}
		commit, call := inRun.stop()
		commits, calls = append(commits, commit/steps), append(calls, call/steps)
	}

	// DBOS, its system tables in a schema of its own in the same database.
	dctx, err := dbos.NewContext(ctx, dbos.Config{
		AppName:        "mcpflow-bench",
		DatabaseURL:    base,
		DatabaseSchema: schema(b, base, "dbos"),
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)), // keep the benchmark output to the figures
	})
	if err != nil {
		b.Fatal(err)
	}
	// The same chain as mcpflow's: each step calls t with the previous
	// step's n + 1, and DBOS checkpoints the whole result.
	chainWF := func(ctx dbos.Context, n int) (int, error) {
		for range steps {
			res, err := dbos.RunAsStep(ctx, func(ctx context.Context) (*mcp.CallToolResult, error) {
				return call(ctx, n)
			}, dbos.WithStepName("t"))
			if err != nil {
				return 0, err
			}
			out, _ := res.StructuredContent.(map[string]any)
			f, _ := out["n"].(float64)
			n = int(f) + 1
		}
		return n, nil
	}
	dbos.RegisterWorkflow(dctx, chainWF, dbos.WithWorkflowName("chain"))
	if err := dbos.Launch(dctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dbos.Shutdown(dctx, 5*time.Second) })
	runDBOS := func() {
		h, err := dbos.RunWorkflow(dctx, chainWF, 1)
		if err != nil {
			b.Fatalf("dbos run: %v", err)
		}
		if n, err := h.GetResult(); err != nil || n != steps+1 {
			b.Fatalf("dbos run: %v %d", err, n)
		}
	}

	// One run of each first, so that neither pays for opening connections
	// or warming caches inside the rounds.
	runMCPFlow()
	runDBOS()
	commits, calls = nil, nil

	var bares, flows, dboses, overheads, ratios []float64
	round := 0
	for b.Loop() {
		bares = append(bares, median(200, func() {
			if _, err := call(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}))
		var flow, db float64
		if round%2 == 0 {
			flow, db = perStep(runMCPFlow), perStep(runDBOS)
		} else {
			db, flow = perStep(runDBOS), perStep(runMCPFlow)
		}
		round++
		bare := bares[len(bares)-1]
		flows, dboses = append(flows, flow), append(dboses, db)
		rests = append(rests, flow-commits[len(commits)-1]-calls[len(calls)-1])
		overheads = append(overheads, (flow-bare)/(db-bare))
		ratios = append(ratios, flow/db)
	}
	b.ReportMetric(med(bares), "bare-µs")
	b.ReportMetric(med(flows), "mcpflow-step-µs")
	b.ReportMetric(med(commits), "mcpflow-commit-µs")
	b.ReportMetric(med(calls), "mcpflow-call-µs")
	b.ReportMetric(med(rests), "mcpflow-rest-µs")
	b.ReportMetric(med(dboses), "dbos-step-µs")
	b.ReportMetric(med(overheads), "mcpflow/dbos-overhead")
	b.ReportMetric(med(ratios), "mcpflow/dbos-step")
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

// memSession is an engine.Session on an in-memory client session, as in
// the engine's own tests: it refuses a call without a durable intent and
// sends the intent's idempotency key in _meta, as engine.MCP does.
type memSession struct{ cs *mcp.ClientSession }

var _ engine.Session = memSession{}

func (s memSession) Tool(context.Context, string) (upstream.Tool, error) {
	// The bench server's only tool; listing it on every step would be a
	// cost the real upstream.Session does not pay (it caches the list).
	return upstream.Tool{Name: "t", Annotations: json.RawMessage(`{"idempotentHint":true}`)}, nil
}

func (s memSession) Call(ctx context.Context, in journal.Intent, tool string, args json.RawMessage, _ func(float64, float64, string)) (*mcp.CallToolResult, error) {
	if !in.Valid() {
		return nil, engine.ErrNoIntent
	}
	meta := map[string]any{engine.MetaIdempotencyKey: in.IdempotencyKey}
	return s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
}

// benchServer has one tool, t, that answers {n} with {n}, in text and
// structured content (engine/perf_test.go's).
func benchServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ N int }
			json.Unmarshal(req.Params.Arguments, &in)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.N)}}, StructuredContent: map[string]any{"n": in.N}}, nil
		})
	return srv
}

// connect returns a client session to srv over in-memory transports,
// closed when b ends.
func connect(b *testing.B, srv *mcp.Server) *mcp.ClientSession {
	b.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// chain is a workflow of n steps, each calling t with the previous step's
// n + 1 (engine/perf_test.go's). The server is never started: the engine's
// Connect hands out the in-memory session.
func chain(n int) string {
	var s strings.Builder
	s.WriteString("name: chain\nservers: {s: {builtin: demo}}\nsteps:\n  - {id: s0, server: s, tool: t, with: {n: 1}}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&s, "  - {id: s%d, server: s, tool: t, with: {n: \"${{ steps.s%d.structuredContent.n + 1 }}\"}}\n", i, i-1)
	}
	return s.String()
}

// schema creates a fresh schema for prefix in the database at base and
// drops it, with everything in it, when b ends. The mcpflow journal needs
// it to exist; DBOS would make its own, but then nothing would drop it.
func schema(b *testing.B, base, prefix string) string {
	b.Helper()
	name := fmt.Sprintf("bench_%s_%d_%x", prefix, time.Now().UnixNano(), rand.Uint32())
	exec(b, base, "CREATE SCHEMA IF NOT EXISTS "+name)
	b.Cleanup(func() { exec(b, base, "DROP SCHEMA IF EXISTS "+name+" CASCADE") })
	return name
}

func exec(b *testing.B, base, sql string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		b.Fatalf("PostgreSQL at MCPFLOW_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

// withSearchPath is base with its search_path set to schema, where
// journal.OpenPostgres makes its tables (journaltest.WithSearchPath).
func withSearchPath(b *testing.B, base, schema string) string {
	u, err := url.Parse(base)
	if err != nil {
		b.Fatalf("MCPFLOW_TEST_POSTGRES must be a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// perStep runs a workflow once and returns its time per step in µs.
func perStep(run func()) float64 {
	start := time.Now()
	run()
	return float64(time.Since(start).Nanoseconds()) / 1e3 / steps
}

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

func med(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
