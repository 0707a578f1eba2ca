package upstream

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream/demo"
)

// TestSharedReconnectConnectsAFreshSession: when the processes of both
// shared sessions died, Reconnect gives the run a new, working session,
// never the other one (dead too).
func TestSharedReconnectConnectsAFreshSession(t *testing.T) {
	set := Set{"shared": {Name: "shared", Builtin: "demo", Sessions: 2}}
	h := NewShared()
	defer h.Close()
	o := &Options{Self: self(t), Workspace: t.TempDir()}
	a, b := NewPool(set, o), NewPool(set, o)
	a.Share(h)
	b.Share(h)
	var wg sync.WaitGroup
	sess := make([]*Session, 2)
	for i, p := range []*Pool{a, b} {
		wg.Go(func() {
			s, err := p.Session(context.Background(), "shared")
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
	for _, s := range sess {
		syscall.Kill(s.PID(), syscall.SIGKILL)
	}
	time.Sleep(300 * time.Millisecond)
	_, err := sess[0].Call(context.Background(), "greet", []byte(`{"name":"x"}`), nil, nil)
	t.Logf("call on dead session: class %v: %v", Classify(err), err)
	fresh, err := a.Reconnect(context.Background(), "shared", sess[0])
	if err != nil {
		t.Fatal(err)
	}
	if fresh == sess[1] {
		t.Errorf("Reconnect returned the other session, whose process is dead (pid %d)", fresh.PID())
	}
	_, err = fresh.Call(context.Background(), "greet", []byte(`{"name":"x"}`), nil, nil)
	if err != nil {
		t.Errorf("first call on the session Reconnect returned: class %v: %v", Classify(err), err)
	}
}

// TestSharedReconnectLeavesReadsInFlight: a resources/read in flight on a
// shared session counts as a call does, so another run's Reconnect, which
// retires the session, closes it only once the read returned (over
// streamable HTTP, and below over stdio).
func TestSharedReconnectLeavesReadsInFlight(t *testing.T) {
	url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0", Delay: 500 * time.Millisecond})
	set := Set{"remote": {Name: "remote", URL: url, Sessions: 1}}
	h := NewShared()
	defer h.Close()
	a, b := NewPool(set, &Options{}), NewPool(set, &Options{})
	a.Share(h)
	b.Share(h)
	old, err := a.Session(context.Background(), "remote")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := b.Session(context.Background(), "remote"); s != old {
		t.Fatal("not shared")
	}
	read := make(chan error, 1)
	go func() {
		_, err := old.ReadResource(context.Background(), "file:///demo/notes.txt", nil)
		read <- err
	}()
	time.Sleep(100 * time.Millisecond)
	t.Logf("InFlight with a read in flight: %d", old.InFlight())
	if _, err := a.Reconnect(context.Background(), "remote", old); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Errorf("the other run's read in flight was cut by a Reconnect: class %v (%v): %v", Classify(err), Classify(err) == replay.ClassLost, err)
	}
}

func TestSharedReconnectLeavesReadsInFlightStdio(t *testing.T) {
	set := Set{"s": {Name: "s", Builtin: "demo", Args: []string{"--delay", "2s"}, Sessions: 1}}
	h := NewShared()
	defer h.Close()
	o := &Options{Self: self(t), Workspace: t.TempDir()}
	a, b := NewPool(set, o), NewPool(set, o)
	a.Share(h)
	b.Share(h)
	old, err := a.Session(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := b.Session(context.Background(), "s"); s != old {
		t.Fatal("not shared")
	}
	read := make(chan error, 1)
	go func() {
		_, err := old.ReadResource(context.Background(), "file:///demo/notes.txt", nil)
		read <- err
	}()
	time.Sleep(100 * time.Millisecond)
	t.Logf("InFlight with a read in flight: %d", old.InFlight())
	if _, err := a.Reconnect(context.Background(), "s", old); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Errorf("the other run's read in flight was cut by a Reconnect: class %v: %v", Classify(err), err)
	}
}

// startSharedDemo runs demo.Serve over streamable HTTP on addr, with its
// ledger, and returns its URL and a func that stops it.
func startSharedDemo(t *testing.T, addr, ledger string) (string, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- demo.Serve(ctx, demo.Config{HTTPAddr: addr, Ledger: ledger}, strings.NewReader(""), io.Discard, pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatal("no line")
	}
	url, _ := strings.CutPrefix(sc.Text(), "listening on ")
	go func() {
		for sc.Scan() {
		}
	}()
	return url, func() { cancel(); <-done }
}

// TestSharedReconnectAfterTheServerRestarted: the HTTP server restarts
// (its sessions are gone). A run whose call could not be delivered
// reconnects and gets a session of the new server, not the other old one
// (whose first call would fail as a lost call that may have run): its
// call is delivered once.
func TestSharedReconnectAfterTheServerRestarted(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	url, stop := startSharedDemo(t, "127.0.0.1:0", ledger)
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	set := Set{"remote": {Name: "remote", URL: url, Sessions: 2}}
	h := NewShared()
	defer h.Close()
	a, b := NewPool(set, &Options{}), NewPool(set, &Options{})
	a.Share(h)
	b.Share(h)
	var wg sync.WaitGroup
	sess := make([]*Session, 2)
	for i, p := range []*Pool{a, b} {
		wg.Go(func() {
			s, err := p.Session(context.Background(), "remote")
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
	stop()
	_, err := sess[0].Call(context.Background(), "ledger_append", []byte(`{"entry":"x"}`), nil, nil)
	t.Logf("server down: class %v: %v", Classify(err), err)
	_, stop2 := startSharedDemo(t, addr, ledger)
	defer stop2()
	fresh, err := a.Reconnect(context.Background(), "remote", sess[0])
	if err != nil {
		t.Fatal(err)
	}
	if fresh == sess[1] {
		t.Error("Reconnect returned the other session of the server that restarted")
	}
	_, err = fresh.Call(context.Background(), "ledger_append", []byte(`{"entry":"x"}`), nil, nil)
	if err != nil {
		t.Errorf("first delivery after Reconnect: class %v: %v", Classify(err), err)
	}
	data, _ := os.ReadFile(ledger)
	if n := strings.Count(string(data), `"tool":"ledger_append"`); n != 1 {
		t.Errorf("the ledger has %d entries of ledger_append, want the one call delivered once:\n%s", n, data)
	}
}
