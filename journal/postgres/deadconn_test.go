package postgres_test

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/journal/postgres"
)

// cutProxy forwards to the database and can drop every connection at
// once, with no FATAL from the server: what a database restart (or a
// crash) leaves in a pool.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestPipelineOnConnectionsThatDied: every pooled connection dies at
// once, with no word from the server (what a restart of the database or
// of the network leaves in a pool): the next steps' pipelines fail before
// anything of them reached the database, and the writes go on (as the
// transaction's BEGIN failed, and was retried, before pipelines).
func TestPipelineOnConnectionsThatDied(t *testing.T) {
	location := journaltest.PostgresURL(t)
	px := newCutProxy(t, "127.0.0.1:5432")
	via := strings.Replace(location, "127.0.0.1:5432", px.ln.Addr().String(), 1)
	if via == location {
		t.Fatalf("cannot route %s through the proxy", location)
	}
	a := journaltest.OpenStore(t, via, &journal.Options{Worker: "a", Lease: 3 * time.Second}).(*postgres.Store)
	r := &journal.Run{Workflow: "wf"}
	if err := a.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	in, err := a.Begin(&journal.Invocation{RunID: r.ID, Step: "s", Item: -1, Server: "srv", Tool: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if i > 0 {
			px.cut() // the database restarted: every pooled connection is dead
		}
		p, err := a.FinishLater(in, journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{Content: json.RawMessage(`[]`)}})
		if err != nil {
			t.Fatal(err)
		}
		next, err := a.Begin(&journal.Invocation{RunID: r.ID, Step: "s", Item: -1, Server: "srv", Tool: "t"})
		werr := p.Wait()
		t.Logf("step %d after the connections died: begin %v, finish %v", i, err, werr)
		if err != nil || werr != nil {
			t.Errorf("step %d on a dead pooled connection failed (begin %v, finish %v); the transactional path retries it", i, err, werr)
			return
		}
		in = next
	}
}
