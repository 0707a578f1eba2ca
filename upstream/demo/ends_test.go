package demo

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitLedger waits until the ledger at path holds n lines.
func waitLedger(t *testing.T, path string, n int) []ledgerEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows := readLedger(t, path)
		if len(rows) >= n {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger has %d lines, want %d: %+v", len(rows), n, rows)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLedgerEnds: with LedgerEnds, a call the client cancels writes a
// "cancelled" line after its execution's, one whose connection ends first
// an "abandoned" line, one that answers nothing more; without it, nothing
// but executions.
func TestLedgerEnds(t *testing.T) {
	slow := &mcp.CallToolParams{Name: "count_slowly", Arguments: map[string]any{"n": 1000, "delay_ms": 20}, Meta: mcp.Meta{idempotencyKeyMeta: "k1"}}

	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath, LedgerEnds: true}, nil)
	call(t, cs, "greet", map[string]any{"name": "a"}, "k0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := cs.CallTool(ctx, slow); done <- err }()
	waitLedger(t, ledgerPath, 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call: %v", err)
	}
	rows := waitLedger(t, ledgerPath, 3)
	want := []string{`greet k0 {"name":"a"}`, "count_slowly k1 ", "cancelled k1 {\"row\":2,\"tool\":\"count_slowly\"}"}
	for i, r := range rows {
		got := r.Tool + " " + r.IdempotencyKey + " "
		if r.Tool != "count_slowly" {
			got += string(r.Args)
		}
		if i >= len(want) || got != want[i] {
			t.Errorf("ledger line %d: %s, want %q", i+1, got, want)
		}
	}

	// The connection ends with the call in flight (the client's end of it
	// closed, as when a client process dies): abandoned.
	d, err := newDemo(Config{Ledger: ledgerPath, LedgerEnds: true})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := d.newServer(nil).Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := &closableTransport{Transport: ct}
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, err := cs2.CallTool(context.Background(), slow); done <- err }()
	waitLedger(t, ledgerPath, 4)
	conn.conn.Close()
	<-done
	ss.Wait()
	rows = waitLedger(t, ledgerPath, 5)
	var args map[string]any
	json.Unmarshal(rows[4].Args, &args)
	if rows[4].Tool != "abandoned" || args["row"] != float64(4) || len(rows) != 5 {
		t.Errorf("after the connection ended: %+v", rows[3:])
	}

	// Off by default: the ledger counts executions only.
	plain := testLedger(t)
	cs3, _ := connect(t, Config{Ledger: plain}, nil)
	ctx, cancel = context.WithCancel(context.Background())
	go func() { _, err := cs3.CallTool(ctx, slow); done <- err }()
	waitLedger(t, plain, 1)
	cancel()
	<-done
	time.Sleep(100 * time.Millisecond)
	if rows := readLedger(t, plain); len(rows) != 1 {
		t.Errorf("without LedgerEnds: %+v", rows)
	}
}

// closableTransport keeps its connection, for a test to close it under the
// client.
type closableTransport struct {
	mcp.Transport
	conn mcp.Connection
}

func (c *closableTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := c.Transport.Connect(ctx)
	c.conn = conn
	return conn, err
}
