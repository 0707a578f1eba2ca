package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// TestWorkerAPIAndUI: on a PostgreSQL journal the server is a worker. A
// run submitted with queue is journaled for any worker, and this one claims
// and runs it; GET /api/workers and the runs page show the workers and
// the runs each holds; on a bbolt journal /api/workers says there are
// none.
func TestWorkerAPIAndUI(t *testing.T) {
	r := newRigOn(t, journaltest.PostgresURL(t), &httpapi.Options{Poll: 50 * time.Millisecond})
	wf := r.workflow("slow.yaml", "name: slow\nsteps:\n  - {id: count, server: demo, tool: count_slowly, with: {n: 40, delay_ms: 50}}\n")
	var st api.Started
	if code := r.do(http.MethodPost, "/api/runs", api.SubmitRequest{File: wf, Queue: true}, &st); code != http.StatusAccepted {
		t.Fatalf("POST /api/runs queue: %d", code)
	}
	<-r.firstProgress()
	var list httpapi.WorkerList
	if code := r.do(http.MethodGet, "/api/workers", nil, &list); code != http.StatusOK {
		t.Fatalf("GET /api/workers: %d", code)
	}
	if list.Self != "rig" || len(list.Workers) != 1 || !list.Workers[0].Live || !list.Workers[0].Serves ||
		!slices.ContainsFunc(list.Workers[0].Runs, func(id journal.ID) bool { return id.String() == st.Run }) {
		t.Fatalf("workers: %+v; want rig, live, holding %s", list, st.Run)
	}
	_, page := get(t, r.srv.Handler(false), "/")
	for _, want := range []string{`data-worker="rig"`, "this server", st.Run[:18]} {
		if !strings.Contains(page, want) {
			t.Errorf("runs page lacks %q", want)
		}
	}
	r.waitStatus(st.Run, journal.RunSucceeded)
	// The worker lets the run go just after its end is journaled.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code := r.do(http.MethodGet, "/api/workers", nil, &list)
		if code == http.StatusOK && len(list.Workers[0].Runs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the run: %d %+v; want no run held", code, list)
		}
	}

	file := newRig(t, nil)
	var e api.Error
	if code := file.do(http.MethodGet, "/api/workers", nil, &e); code != http.StatusConflict || e.Error.Code != "not_shared" {
		t.Fatalf("GET /api/workers on a file journal: %d %+v", code, e)
	}
}
