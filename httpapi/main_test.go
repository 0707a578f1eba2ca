package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/trust"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/upstream/demo"
)

// The test binary serves the demo when started as "TESTBINARY demo-server
// FLAGS…", so builtin servers run as real stdio subprocesses of it.
func TestMain(m *testing.M) {
	if upstream.Supervising() {
		os.Exit(upstream.Supervise(os.Args[1:]))
	}
	if code, ok := demo.ServeCommand(os.Args[1:]); ok {
		os.Exit(code)
	}
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// rig is a workspace with the demo server configured and a Server owning
// its journal, serving on a unix socket.
type rig struct {
	t         *testing.T
	workspace string
	journal   string
	socket    string
	trust     *trust.Store
	svc       *service.Service
	srv       *httpapi.Server
	client    *http.Client
	// wrap, when set, wraps the journal the server opens.
	wrap func(journal.Store) journal.Store
}

func newRig(t *testing.T, o *httpapi.Options) *rig {
	t.Helper()
	return newRigOn(t, "", o)
}

// newRigOn is a rig whose journal is at location: a PostgreSQL URL, or ""
// for a file in the workspace.
func newRigOn(t *testing.T, location string, o *httpapi.Options) *rig {
	t.Helper()
	return newRigWrapped(t, location, o, nil)
}

// newRigWrapped is newRigOn on a journal that wrap wraps (nil: none).
func newRigWrapped(t *testing.T, location string, o *httpapi.Options, wrap func(journal.Store) journal.Store) *rig {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "mcpflow.yaml"), []byte("servers:\n  demo: {builtin: demo, trust: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, workspace: ws, journal: location, socket: filepath.Join(ws, ".mcpflow", "mcpflow.sock"), wrap: wrap}
	if location == "" {
		r.journal = filepath.Join(ws, ".mcpflow", "journal.db")
	}
	r.start(o)
	r.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", r.socket)
	}}}
	t.Cleanup(func() {
		r.stop()
		if journal.IsPostgres(r.journal) {
			journaltest.CheckAndClose(t, journaltest.OpenStore(t, r.journal, &journal.Options{ReadOnly: true}))
		} else {
			journaltest.CheckFile(t, r.journal)
		}
	})
	return r
}

// start opens the journal and starts a server on it.
func (r *rig) start(o *httpapi.Options) {
	r.t.Helper()
	if r.trust == nil {
		// The user trusts the workspace (the API never can): safe calls
		// are replayed after a stop or a crash.
		r.trust = trust.OpenStore(r.t.TempDir())
		if err := r.trust.Add(r.workspace); err != nil {
			r.t.Fatal(err)
		}
	}
	svc, err := service.New(nil, &service.Options{
		Workspace:  r.workspace,
		TrustStore: r.trust,
		OpenJournal: func() (journal.Store, error) {
			j, err := door.OpenStore(r.journal, &journal.Options{Worker: "rig", Serves: true, Lease: 2 * time.Second})
			if err == nil && r.wrap != nil {
				j = r.wrap(j)
			}
			return j, err
		},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	opts := httpapi.Options{}
	if o != nil {
		opts = *o
	}
	opts.Service, opts.Workspace, opts.Socket = svc, r.workspace, r.socket
	srv, err := httpapi.New(&opts)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.svc, r.srv = svc, srv
}

// stop stops the server and closes its journal (again: a no-op).
func (r *rig) stop() {
	if r.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.srv.Stop(ctx); err != nil {
		r.t.Error(err)
	}
	r.svc.Close()
	r.srv = nil
}

func (r *rig) workflow(name, src string) string {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.workspace, name), []byte(src), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return name
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (r *rig) do(method, path string, body any, out any) int {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, "http://mcpflow"+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			r.t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// sse reads server-sent events from path until each says stop; ready is
// closed once the server has subscribed the stream (its first comment).
func (r *rig) sse(ctx context.Context, path string, ready chan<- struct{}, each func(api.Event) bool) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://mcpflow"+path, nil)
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), ": mcpflow events") && ready != nil {
			close(ready)
			ready = nil
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e api.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return err
		}
		if !each(e) {
			return nil
		}
	}
	return sc.Err()
}

// firstProgress subscribes to the server's events and returns a channel
// closed at the first step_progress (a call has reached its server), or
// when the stream ends; the test's end stops it.
func (r *rig) firstProgress() <-chan struct{} {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	r.t.Cleanup(cancel)
	subscribed, inCall := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(inCall)
		r.sse(ctx, "/api/events", subscribed, func(e api.Event) bool { return e.Kind != "step_progress" })
	}()
	select {
	case <-subscribed:
	case <-inCall:
		r.t.Fatal("the event stream ended before it was subscribed")
	}
	return inCall
}

// waitStatus waits for run to reach status.
func (r *rig) waitStatus(run string, want journal.RunStatus) *service.Report {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := r.svc.RunDetail(run)
		if err == nil && rep.Run.Status == want {
			return rep
		}
		if time.Now().After(deadline) {
			got := "no run"
			if err == nil {
				got = rep.Run.Status.String()
			}
			r.t.Fatalf("run %s: %s (%v), want %s", run, got, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
