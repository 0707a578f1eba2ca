package httpapi_test

import (
	"context"
	"strings"
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
