package upstream

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/upstream/demo"
)

// sharedPools returns two pools (two runs) that share the sessions of
// set's servers; the sessions are stopped when the test ends.
func sharedPools(t *testing.T, set Set, o *Options) (a, b *Pool) {
	h := NewShared()
	t.Cleanup(func() { h.Close() })
	a, b = NewPool(set, o), NewPool(set, o)
	a.Share(h)
	b.Share(h)
	return a, b
}

// twoSessions has a and b call name's count_slowly at once, so that a
// server with sessions: 2 is connected twice, and returns their sessions.
func twoSessions(t *testing.T, a, b *Pool, name string) [2]*Session {
	t.Helper()
	var sess [2]*Session
	var wg sync.WaitGroup
	for i, p := range []*Pool{a, b} {
		wg.Go(func() {
			s, err := p.Session(context.Background(), name)
			if err != nil {
				t.Error(err)
				return
			}
			sess[i] = s
			if _, err := s.Call(context.Background(), "count_slowly", []byte(`{"n":1,"delay_ms":400}`), nil, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if sess[0] == sess[1] {
		t.Fatal("two calls at once on a server with sessions: 2 shared one session")
	}
	return sess
}

// TestSharedReconnectConnectsAFreshSession: when the processes of both
// shared sessions died, Reconnect gives the run a new, working session,
// never the other one (dead too).
func TestSharedReconnectConnectsAFreshSession(t *testing.T) {
	a, b := sharedPools(t, Set{"shared": {Name: "shared", Builtin: "demo", Sessions: 2}}, &Options{Self: self(t), Workspace: t.TempDir()})
	sess := twoSessions(t, a, b, "shared")
	for _, s := range sess {
		syscall.Kill(s.PID(), syscall.SIGKILL)
	}
	time.Sleep(300 * time.Millisecond)
	sess[0].Call(context.Background(), "greet", []byte(`{"name":"x"}`), nil, nil) // fails: the process is gone
	fresh, err := a.Reconnect(context.Background(), "shared", sess[0])
	if err != nil {
		t.Fatal(err)
	}
	if fresh == sess[1] {
		t.Errorf("Reconnect returned the other session, whose process is dead (pid %d)", fresh.PID())
	}
	if _, err := fresh.Call(context.Background(), "greet", []byte(`{"name":"x"}`), nil, nil); err != nil {
		t.Errorf("first call on the session Reconnect returned: class %v: %v", Classify(err), err)
	}
}

// TestSharedReconnectLeavesReadsInFlight: a resources/read in flight on a
// shared session counts as a call does, so another run's Reconnect, which
// retires the session, closes it only once the read returned.
func TestSharedReconnectLeavesReadsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  func(t *testing.T) *Server
	}{
		{"streamable-http", func(t *testing.T) *Server {
			return &Server{URL: serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0", Delay: 500 * time.Millisecond})}
		}},
		{"stdio", func(*testing.T) *Server {
			return &Server{Builtin: "demo", Args: []string{"--delay", "2s"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.srv(t)
			srv.Name, srv.Sessions = "s", 1
			a, b := sharedPools(t, Set{"s": srv}, &Options{Self: self(t), Workspace: t.TempDir()})
			old, err := a.Session(context.Background(), "s")
			if err != nil {
				t.Fatal(err)
			}
			if s, _ := b.Session(context.Background(), "s"); s != old {
				t.Fatal("two runs got different sessions of a server with sessions: 1")
			}
			read := make(chan error, 1)
			go func() {
				_, err := old.ReadResource(context.Background(), "file:///demo/notes.txt", nil)
				read <- err
			}()
			time.Sleep(100 * time.Millisecond)
			if n := old.InFlight(); n != 1 {
				t.Errorf("InFlight with a read in flight: %d, want 1", n)
			}
			if _, err := a.Reconnect(context.Background(), "s", old); err != nil {
				t.Fatal(err)
			}
			if err := <-read; err != nil {
				t.Errorf("the other run's read in flight was cut by a Reconnect: class %v: %v", Classify(err), err)
			}
		})
	}
}

// TestSharedReconnectAfterTheServerRestarted: the HTTP server restarts
// (its sessions are gone). A run whose call could not be delivered
// reconnects and gets a session of the new server, not the other old one
// (whose first call would fail as a lost call that may have run): its
// call is delivered once.
func TestSharedReconnectAfterTheServerRestarted(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	url, stop := startDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0", Ledger: ledger})
	a, b := sharedPools(t, Set{"remote": {Name: "remote", URL: url, Sessions: 2}}, &Options{})
	sess := twoSessions(t, a, b, "remote")
	stop()
	sess[0].Call(context.Background(), "ledger_append", []byte(`{"entry":"x"}`), nil, nil) // fails: the server is down
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	startDemoHTTP(t, demo.Config{HTTPAddr: addr, Ledger: ledger})
	fresh, err := a.Reconnect(context.Background(), "remote", sess[0])
	if err != nil {
		t.Fatal(err)
	}
	if fresh == sess[1] {
		t.Error("Reconnect returned the other session of the server that restarted")
	}
	if _, err := fresh.Call(context.Background(), "ledger_append", []byte(`{"entry":"x"}`), nil, nil); err != nil {
		t.Errorf("first delivery after Reconnect: class %v: %v", Classify(err), err)
	}
	data, _ := os.ReadFile(ledger)
	if n := strings.Count(string(data), `"tool":"ledger_append"`); n != 1 {
		t.Errorf("the ledger has %d entries of ledger_append, want the one call delivered once:\n%s", n, data)
	}
}
