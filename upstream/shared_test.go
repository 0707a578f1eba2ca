package upstream

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/upstream/demo"
)

// Two pools sharing sessions: a server whose entry sets sessions: 2 is
// connected at most twice, whatever the number of runs (pools) and calls
// in flight; an entry without it is the pool's own; Pool.Close leaves the
// shared sessions open and Shared.Close stops them.
func TestSharedSessions(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ws := t.TempDir()
	set := Set{
		"shared": {Name: "shared", Builtin: "demo", Sessions: 2},
		"own":    {Name: "own", Builtin: "demo"},
	}
	o := &Options{Self: self(t), Workspace: ws}
	h := NewShared()
	pools := []*Pool{NewPool(set, o), NewPool(set, o), NewPool(set, o)}
	for _, p := range pools {
		p.Share(h)
	}
	// Calls in flight on every pool at once: at most two processes.
	pids := map[int]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			s, err := pools[i%len(pools)].Session(context.Background(), "shared")
			if err != nil {
				t.Error(err)
				return
			}
			res, err := s.Call(context.Background(), "greet", []byte(`{"name":"x"}`), nil, nil)
			if err != nil || res.IsError {
				t.Errorf("greet: %v %+v", err, res)
			}
			mu.Lock()
			pids[s.PID()] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(pids) == 0 || len(pids) > 2 {
		t.Fatalf("the shared server ran as %d processes, want 1 or 2", len(pids))
	}
	own0, err := pools[0].Session(context.Background(), "own")
	if err != nil {
		t.Fatal(err)
	}
	own1, err := pools[1].Session(context.Background(), "own")
	if err != nil {
		t.Fatal(err)
	}
	if own0.PID() == own1.PID() {
		t.Error("two pools share the session of an entry without sessions:")
	}
	for _, p := range pools {
		if err := p.Close(); err != nil {
			t.Errorf("Pool.Close: %v", err)
		}
	}
	if alive(own0.PID()) {
		t.Errorf("own server %d still runs after its pool closed", own0.PID())
	}
	for pid := range pids {
		if !alive(pid) {
			t.Errorf("shared server %d stopped with a pool", pid)
		}
	}
	// A later run gets a session already open.
	p := NewPool(set, o)
	p.Share(h)
	s, err := p.Session(context.Background(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	if !pids[s.PID()] {
		t.Errorf("a later run started server %d instead of using one open (%v)", s.PID(), pids)
	}
	if err := h.Close(); err != nil {
		t.Errorf("Shared.Close: %v", err)
	}
	for pid := range pids {
		if alive(pid) {
			t.Errorf("shared server %d still runs after Shared.Close", pid)
		}
	}
	if kids := children(t); len(kids) > 0 {
		t.Errorf("child processes left after Shared.Close: %v", kids)
	}
	if _, err := p.Session(context.Background(), "shared"); err == nil {
		t.Error("Session after Shared.Close succeeded")
	}
}

// A reconnect after one call's lost connection does not cut the other
// runs' calls on the shared session short: the old session is closed once
// they returned, and later calls go to a new one.
func TestSharedReconnectWaitsForCallsInFlight(t *testing.T) {
	url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0", Delay: 300 * time.Millisecond})
	a, b := sharedPools(t, Set{"remote": {Name: "remote", URL: url, Sessions: 1}}, &Options{})
	old, err := a.Session(context.Background(), "remote")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := b.Session(context.Background(), "remote"); s != old {
		t.Fatal("two runs got different sessions of a server with sessions: 1")
	}
	called := make(chan error, 1)
	go func() {
		_, err := old.Call(context.Background(), "greet", []byte(`{"name":"b"}`), nil, nil)
		called <- err
	}()
	for old.InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	fresh, err := a.Reconnect(context.Background(), "remote", old)
	if err != nil {
		t.Fatal(err)
	}
	if fresh == old {
		t.Fatal("Reconnect returned the session it dropped")
	}
	if err := <-called; err != nil {
		t.Errorf("the other run's call in flight failed: %v", err)
	}
	select {
	case <-old.Idle():
	case <-time.After(5 * time.Second):
		t.Fatal("old session still has calls in flight")
	}
	if s, _ := b.Session(context.Background(), "remote"); s != fresh {
		t.Error("a later call did not get the new session")
	}
	callGreet(t, fresh, "c")
}

// A server that cannot start fails every caller, concurrent ones
// included, and leaves nothing behind to pick.
func TestSharedFailedConnect(t *testing.T) {
	set := Set{"bad": {Name: "bad", Command: filepath.Join(t.TempDir(), "missing"), Sessions: 2}}
	h := NewShared()
	defer h.Close()
	p := NewPool(set, &Options{Workspace: t.TempDir()})
	p.Share(h)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if s, err := p.Session(context.Background(), "bad"); err == nil {
				t.Errorf("a session of a missing command: %v", s)
			}
		})
	}
	wg.Wait()
	h.mu.Lock()
	n := len(h.groups)
	h.mu.Unlock()
	if n != 0 {
		t.Errorf("%d groups kept after failed connects", n)
	}
}
