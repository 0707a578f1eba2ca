package service_test

import (
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/service"
)

// TestRunsByCallAndTime: runs are kept by the calls they made (server,
// tool) and by when they started (since, until), newest first, a page of
// Limit at a time; CountRuns counts the same.
func TestRunsByCallAndTime(t *testing.T) {
	r := newRig(t)
	run := func(name, src string) *service.Report {
		t.Helper()
		ev := newEvents()
		rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow(name, src), Events: ev.add})
		if err != nil {
			t.Fatal(err)
		}
		// The run's end says its time: work within wall.
		ev.mu.Lock()
		defer ev.mu.Unlock()
		for _, e := range ev.list {
			if e.Kind == engine.RunFinished && (e.Work <= 0 || e.Work > e.Elapsed || e.Elapsed > rep.Run.FinishedAt.Sub(rep.Run.StartedAt)) {
				t.Errorf("run_finished: work %v, wall %v; the run took %v", e.Work, e.Elapsed, rep.Run.FinishedAt.Sub(rep.Run.StartedAt))
			}
		}
		return rep
	}
	first := run("hello.yaml", hello)
	time.Sleep(5 * time.Millisecond)
	ledger := run("ledger.yaml", "name: ledger\nsteps:\n  - {id: add, server: demo, tool: ledger_append, with: {entry: x}}\n")
	last := run("hello.yaml", hello)

	ids := func(q service.RunQuery) []string {
		t.Helper()
		runs, err := r.svc.Runs(q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range runs {
			out = append(out, s.Run.ID.String())
		}
		return out
	}
	same := func(what string, got []string, want ...*service.Report) {
		t.Helper()
		ok := len(got) == len(want)
		for i := range want {
			ok = ok && got[i] == want[i].Run.ID.String()
		}
		if !ok {
			t.Errorf("%s: %v, want %d runs", what, got, len(want))
		}
	}
	same("tool ledger_append", ids(service.RunQuery{Tool: "ledger_append"}), ledger)
	same("server demo, tool upper", ids(service.RunQuery{Server: "demo", Tool: "upper"}), last, first)
	same("tool upper, one a page", ids(service.RunQuery{Tool: "upper", Limit: 1}), last)
	same("tool upper, after the cursor", ids(service.RunQuery{Tool: "upper", Limit: 1, Cursor: last.Run.ID.String()}), first)
	same("server nope", ids(service.RunQuery{Server: "nope"}))
	same("until the first run's start", ids(service.RunQuery{Until: first.Run.StartedAt}), first)
	same("since the ledger run, until its end", ids(service.RunQuery{Since: ledger.Run.StartedAt, Until: *ledger.Run.FinishedAt}), ledger)
	if c, err := r.svc.CountRuns(service.RunQuery{Tool: "upper"}); err != nil || c.N != 2 || c.More {
		t.Errorf("count of tool upper: %+v, %v; want 2", c, err)
	}
	if c, err := r.svc.CountRuns(service.RunQuery{Until: first.Run.StartedAt}); err != nil || c.N != 1 {
		t.Errorf("count until the first run: %+v, %v; want 1", c, err)
	}
}
