package httpapi_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// TestUnresumableRunIsClaimedAtEachPoll: a run whose resume fails with
// an error that does not block it (here its record is damaged) is let go;
// its release pokes the worker (and every other), which claims it again
// at the next poll, not at once, over and over, as fast as the database
// answers (782 claims in 2 s before).
func TestUnresumableRunIsClaimedAtEachPoll(t *testing.T) {
	location := journaltest.PostgresURL(t)
	j := journaltest.OpenStore(t, location, &journal.Options{Worker: "sub"})
	r := &journal.Run{Workflow: "wf", Definition: []byte("name: wf\n")}
	if err := j.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	j.(journal.Shared).Release(r.ID)
	j.Close()
	exec := func(q string) {
		c, err := pgx.Connect(context.Background(), location)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), q, r.ID.String()); err != nil {
			t.Fatal(err)
		}
	}
	exec(`UPDATE mcpflow_runs SET record = '\x0001'::bytea WHERE id = $1::uuid`)
	var claims atomic.Int64
	rg := newRigOn(t, location, &httpapi.Options{Poll: time.Second, Logf: func(f string, a ...any) {
		if strings.HasPrefix(f, "claimed run") {
			claims.Add(1)
		}
	}})
	time.Sleep(2 * time.Second)
	n := claims.Load()
	rg.stop()
	exec(`DELETE FROM mcpflow_runs WHERE id = $1::uuid`)
	if n > 3 {
		t.Errorf("claimed %d times in 2s; Poll is 1s", n)
	}
}

// TestClaimedRunsStartTogether: a worker resumes the runs it claims
// several at once, not one after another. Each resume asks the journal
// whether its run's cancel was requested; here that answer waits until
// four resumes ask at once (or 3 s pass), and the test fails unless four
// did.
func TestClaimedRunsStartTogether(t *testing.T) {
	const runs = 4
	location := journaltest.PostgresURL(t)
	sub := journaltest.OpenStore(t, location, &journal.Options{Worker: "sub"})
	var ids []journal.ID
	for range runs {
		r := &journal.Run{Workflow: "wf", Source: "wf.yaml",
			Definition: []byte("name: wf\nsteps:\n  - {id: a, server: demo, tool: upper, with: {text: x}}\n")}
		if err := sub.CreateRun(r); err != nil {
			t.Fatal(err)
		}
		sub.(journal.Shared).Release(r.ID)
		ids = append(ids, r.ID)
	}
	sub.Close()
	g := &gate{want: runs, open: make(chan struct{})}
	rg := newRigWrapped(t, location, &httpapi.Options{Poll: time.Second}, func(j journal.Store) journal.Store {
		return &gatedJournal{Shared: j.(journal.Shared), gate: g}
	})
	for _, id := range ids {
		rg.waitStatus(id.String(), journal.RunSucceeded)
	}
	if most := g.most.Load(); most < runs {
		t.Errorf("at most %d resumes at once; want the %d claimed runs resumed together", most, runs)
	}
}

// gate holds each caller until want callers are in at once, or 3 s pass,
// and counts the most that were.
type gate struct {
	want       int64
	in, most   atomic.Int64
	open       chan struct{}
	openedOnce sync.Once
}

func (g *gate) pass() {
	n := g.in.Add(1)
	defer g.in.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	if n >= g.want {
		g.openedOnce.Do(func() { close(g.open) })
	}
	select {
	case <-g.open:
	case <-time.After(3 * time.Second):
	}
}

// gatedJournal passes each CancelRequested, which every resume on a
// shared journal asks first, through its gate.
type gatedJournal struct {
	journal.Shared
	gate *gate
}

func (j *gatedJournal) CancelRequested(id journal.ID) (string, bool, error) {
	j.gate.pass()
	return j.Shared.CancelRequested(id)
}
