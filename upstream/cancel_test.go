package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpmeta "github.com/mcpflow/mcpflow/internal/meta"
)

// ledgerRows reads the demo ledger at path: each line's tool and key.
func ledgerRows(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row struct {
			Tool string `json:"tool"`
			Key  string `json:"idempotency_key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		rows = append(rows, row.Tool+" "+row.Key)
	}
	return rows
}

// TestCloseAfterCancelTellsTheServer: a session closed the moment a
// cancelled call returns (Ctrl-C, runs cancel: the run ends and its
// servers stop) still puts notifications/cancelled on the wire first.
// go-sdk sends it from a goroutine of its own after the call returned;
// without Close waiting for it, the server sees its input end instead.
func TestCloseAfterCancelTellsTheServer(t *testing.T) {
	ws := t.TempDir()
	ledger := filepath.Join(ws, "ledger.jsonl")
	srv := &Server{Name: "demo", Builtin: "demo", Env: map[string]string{"MCPFLOW_DEMO_LEDGER": ledger, "MCPFLOW_DEMO_LEDGER_ENDS": "1"}}
	var want []string
	for i := range 8 {
		s := connect(t, srv, &Options{Self: self(t), Workspace: ws})
		key := fmt.Sprintf("call-%d", i)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := s.Call(ctx, "count_slowly", json.RawMessage(`{"n":1000,"delay_ms":20}`), map[string]any{mcpmeta.IdempotencyKey: key}, nil)
			done <- err
		}()
		want = append(want, "count_slowly "+key, "cancelled "+key)
		for deadline := time.Now().Add(10 * time.Second); len(ledgerRows(t, ledger)) < len(want)-1; time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the call never reached the server: %q", ledgerRows(t, ledger))
			}
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("call: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	if got := ledgerRows(t, ledger); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWireTapOwesCancels: what the tap counts as owed and paid.
func TestWireTapOwesCancels(t *testing.T) {
	const short = 20 * time.Millisecond
	cancelOf := func(id int64) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"requestId":%d,"reason":"context canceled"}`, id))
	}
	pend := func(tap *wireTap, id int64, method string) {
		tap.mu.Lock()
		tap.pending[id] = method
		tap.mu.Unlock()
	}

	tap := newWireTap()
	if !tap.awaitCancels(short) {
		t.Error("a fresh tap owes something")
	}
	pend(tap, 7, "tools/call")
	tap.owe()
	if tap.awaitCancels(short) {
		t.Error("settled before the notification was written")
	}
	pend(tap, 8, "tools/list")
	tap.cancelWritten(cancelOf(8))
	if tap.awaitCancels(short) {
		t.Error("a cancelled tools/list paid for a tools/call")
	}
	tap.cancelWritten(cancelOf(7))
	if !tap.awaitCancels(short) {
		t.Error("not settled after the tools/call's notification")
	}

	// go-sdk may write the notification before Call counts it.
	tap = newWireTap()
	tap.cancelWritten(cancelOf(3)) // answered already: not pending
	tap.owe()
	if !tap.awaitCancels(short) {
		t.Error("a notification written before it was owed did not count")
	}

	// A broken connection writes nothing more: nothing to wait for.
	tap = newWireTap()
	tap.owe()
	tap.broke()
	tap.owe()
	if !tap.awaitCancels(short) {
		t.Error("waiting on a broken connection")
	}
}
