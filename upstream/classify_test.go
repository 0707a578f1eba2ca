package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
)

// The values below mirror how go-sdk v1.8.0 builds its errors:
// mcp/transport.go call() wraps with "calling %q: %w" or, after the session
// broke, "%w: calling %q: %v" around ErrConnectionClosed; the streamable
// client's Write (mcp/streamable.go) wraps http.Client.Do errors as
// "%s: %w: %w" with jsonrpc2.ErrRejected (-32005) and the *url.Error, and a
// JSON-RPC error body as "%s: %w: %w: %v" with both.
func TestClassify(t *testing.T) {
	const method = "tools/call"
	rejected := &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}
	calling := func(err error) error { return fmt.Errorf("calling %q: %w", method, err) }
	post := func(err error) error {
		return calling(fmt.Errorf("sending %q: %w: %w", method, rejected,
			&url.Error{Op: "Post", URL: "http://127.0.0.1:8080/mcp", Err: err}))
	}
	httpStatus := func(body *jsonrpc.Error, status string) error {
		return calling(fmt.Errorf("sending %q: %w: %w: %v", method, body, rejected, status))
	}
	syscallErr := func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
	}
	closed := fmt.Errorf("%w: calling %q: %v", mcp.ErrConnectionClosed, method,
		fmt.Errorf("%w: %w", &jsonrpc.Error{Code: -32003, Message: "client is closing"}, io.EOF))

	for _, tc := range []struct {
		name string
		err  error
		want replay.Class
	}{
		{"nil", nil, replay.ClassNone},
		{"cancelled", context.Canceled, replay.ClassAborted},
		{"deadline", context.DeadlineExceeded, replay.ClassTimedOut},
		{"cancelled during POST", post(context.Canceled), replay.ClassAborted},
		{"deadline during dial", post(&net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}), replay.ClassTimedOut},
		{"cancel notify joined", errors.Join(context.Canceled, io.EOF), replay.ClassAborted},
		{"stdio EOF", calling(io.EOF), replay.ClassLost},
		{"stdio unexpected EOF", calling(io.ErrUnexpectedEOF), replay.ClassLost},
		{"stdio broken pipe", calling(&os.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}), replay.ClassLost},
		{"session already closed", closed, replay.ClassNotDelivered},
		{"session already closed, wrapped", fmt.Errorf("step fetch: %w", closed), replay.ClassNotDelivered},
		{"HTTP EOF mid-POST", post(io.EOF), replay.ClassLost},
		{"HTTP reset mid-POST", post(syscallErr("read", syscall.ECONNRESET)), replay.ClassLost},
		{"HTTP broken pipe", post(syscallErr("write", syscall.EPIPE)), replay.ClassLost},
		{"HTTP connection refused", post(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), replay.ClassNotDelivered},
		{"HTTP dial DNS failure", post(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "mcp.invalid"}}), replay.ClassNotDelivered},
		{"HTTP refused without OpError", post(syscall.ECONNREFUSED), replay.ClassNotDelivered},
		{"dial failure outside -32005", calling(syscallErr("dial", syscall.ECONNREFUSED)), replay.ClassLost},
		{"HTTP 503 transient", calling(fmt.Errorf("%w: sending %q: %v", rejected, method, "Service Unavailable")), replay.ClassLost},
		{"bare -32005", rejected, replay.ClassLost},
		{"session missing", calling(fmt.Errorf("sending %q: failed to connect (session ID: %v): %w", method, "s1", mcp.ErrSessionMissing)), replay.ClassLost},
		{"unknown error", errors.New("something odd"), replay.ClassLost},
		{"parse error", calling(&jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error"}), replay.ClassRejected},
		{"invalid request", calling(&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}), replay.ClassRejected},
		{"method not found", calling(&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}), replay.ClassRejected},
		{"unknown tool", calling(&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "x"`}), replay.ClassRejected},
		{"HTTP 400 with invalid params body", httpStatus(&jsonrpc.Error{Code: -32602, Message: "invalid params"}, "Bad Request"), replay.ClassRejected},
		{"internal error", calling(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "child died"}), replay.ClassServerError},
		{"HTTP 500 with internal error body", httpStatus(&jsonrpc.Error{Code: -32603, Message: "internal"}, "Internal Server Error"), replay.ClassServerError},
		{"handler Go error (code 0)", calling(&jsonrpc.Error{Code: 0, Message: "disk full"}), replay.ClassServerError},
		{"server-defined code", calling(&jsonrpc.Error{Code: -32000, Message: "busy"}), replay.ClassServerError},
		{"positive code", calling(&jsonrpc.Error{Code: 42, Message: "x"}), replay.ClassServerError},
	} {
		if got := upstream.Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
