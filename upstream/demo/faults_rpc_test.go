package demo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireError calls tool and returns the *jsonrpc.Error the client got; it
// fails the test unless the call failed with one and the response on the
// wire was an error response without a result.
func wireError(t *testing.T, cs *mcp.ClientSession, rt *captureTransport, tool string, args any) *jsonrpc.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: mcp.Meta{idempotencyKeyMeta: "k"}})
	if err == nil {
		t.Fatalf("CallTool(%s) = %+v (isError %v), want a JSON-RPC error", tool, res, res.IsError)
	}
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("CallTool(%s) error %v (%T), want a *jsonrpc.Error in its chain", tool, err, err)
	}
	if resp := rt.last(); resp == nil || resp.Error == nil || resp.Result != nil {
		t.Fatalf("last response on the wire %+v, want an error response without a result", resp)
	}
	return we
}

func TestFaultRPCErrorAfterCommit(t *testing.T) {
	exits := interceptExit(t)
	ledgerPath := testLedger(t)
	cs, rt := connect(t, Config{Ledger: ledgerPath, Fault: "rpc-error-after-commit", FaultTool: "ledger_append"}, nil)
	we := wireError(t, cs, rt, "ledger_append", map[string]any{"entry": "x"})
	if we.Code != jsonrpc.CodeInternalError || we.Message != "internal error" {
		t.Errorf("error = {%d %q}, want {-32603 \"internal error\"}", we.Code, we.Message)
	}
	entries := readLedger(t, ledgerPath)
	if len(entries) != 1 || entries[0].Tool != "ledger_append" || entries[0].IdempotencyKey != "k" {
		t.Fatalf("ledger = %+v, want one ledger_append row (committed before the error)", entries)
	}
	// Every call of the fault tool fails the same way and commits; others
	// are unaffected; the process never exits.
	wireError(t, cs, rt, "ledger_append", map[string]any{"entry": "y"})
	if got := text(t, call(t, cs, "upper", map[string]any{"text": "x"}, "")); got != "X" {
		t.Errorf("upper: text = %q", got)
	}
	if n := len(readLedger(t, ledgerPath)); n != 3 {
		t.Errorf("ledger has %d rows, want 3", n)
	}
	if got := exits(); len(got) != 0 {
		t.Errorf("exit called with %v", got)
	}
}

func TestFaultRejectBeforeCommit(t *testing.T) {
	exits := interceptExit(t)
	ledgerPath := testLedger(t)
	cs, rt := connect(t, Config{Ledger: ledgerPath, Fault: "reject-before-commit", FaultTool: "ledger_append"}, nil)
	we := wireError(t, cs, rt, "ledger_append", map[string]any{"entry": "x"})
	if we.Code != jsonrpc.CodeInvalidParams || we.Message != "invalid params" {
		t.Errorf("error = {%d %q}, want {-32602 \"invalid params\"}", we.Code, we.Message)
	}
	if n := len(readLedger(t, ledgerPath)); n != 0 {
		t.Fatalf("ledger has %d rows, want 0: a rejected call must not execute", n)
	}
	if got := text(t, call(t, cs, "greet", map[string]any{"name": "x"}, "")); got != "Hello, x!" {
		t.Errorf("greet: text = %q", got)
	}
	entries := readLedger(t, ledgerPath)
	if len(entries) != 1 || entries[0].Tool != "greet" || entries[0].Seq != 1 {
		t.Errorf("ledger = %+v, want only greet as row 1", entries)
	}
	if got := exits(); len(got) != 0 {
		t.Errorf("exit called with %v", got)
	}
}

// TestFaultRPCErrorsOverStreamableHTTP checks that the error codes survive
// the HTTP transport too: a JSON-RPC error response is not a dropped
// connection.
func TestFaultRPCErrorsOverStreamableHTTP(t *testing.T) {
	for _, tc := range []struct {
		fault string
		code  int64
		rows  int
	}{
		{"rpc-error-after-commit", jsonrpc.CodeInternalError, 1},
		{"reject-before-commit", jsonrpc.CodeInvalidParams, 0},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			ledgerPath := testLedger(t)
			url := startServe(t, Config{HTTPAddr: "127.0.0.1:0", Ledger: ledgerPath, Fault: tc.fault})
			cs, _ := httpConnect(t, streamable(t, url))
			err := callErr(t, cs, "upper", map[string]any{"text": "x"})
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != tc.code {
				t.Errorf("error %v, want a *jsonrpc.Error with code %d", err, tc.code)
			}
			if n := len(readLedger(t, ledgerPath)); n != tc.rows {
				t.Errorf("ledger has %d rows, want %d", n, tc.rows)
			}
		})
	}
}

func TestFaultRPCErrorModesParse(t *testing.T) {
	for _, mode := range []string{"rpc-error-after-commit", "reject-before-commit"} {
		if _, err := newDemo(Config{Fault: mode}); err != nil {
			t.Errorf("%s: %v", mode, err)
		}
	}
	_, err := newDemo(Config{Fault: "explode"})
	for _, mode := range []string{"rpc-error-after-commit", "reject-before-commit"} {
		if err == nil || !strings.Contains(err.Error(), mode) {
			t.Errorf("unknown-mode error %v does not list %s", err, mode)
		}
	}
}
