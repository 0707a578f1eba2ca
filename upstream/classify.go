package upstream

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/oauth"
	"github.com/mcpflow/mcpflow/replay"
)

// codeRejectedByTransport is the JSON-RPC code of go-sdk's internal
// jsonrpc2.ErrRejected ("rejected by transport"). In v1.8.0 the streamable
// HTTP client wraps every http.Client.Do error in it, under the comment "Any
// error from client.Do means the request didn't reach the server". That
// comment is wrong: Do also fails when the connection breaks after the POST
// was written and the server's handler has already run. So this code means
// "may have been delivered" unless the chain shows a dial failure.
const codeRejectedByTransport = -32005

// Classify maps an error returned by go-sdk v1.8.0's ClientSession.CallTool
// (and so by Session.Call) to what it proves about execution, as data: a
// replay.Class. nil is ClassNone. It lives beside the transports because it
// reads go-sdk's error internals; package replay keeps only the rule. In order:
//
//   - context.Canceled is ClassAborted, context.DeadlineExceeded is
//     ClassTimedOut (checked first: the SDK may wrap them in anything);
//   - ErrResultTooLarge (Session.Call's own) is ClassTooLarge;
//   - mcp.ErrConnectionClosed is ClassNotDelivered: the call was made after
//     the session broke and was never written;
//   - a *jsonrpc.Error with code -32700, -32600, -32601 or -32602 is
//     ClassRejected; any other code except -32005 is ClassServerError (a code
//     the server sent wins over the -32005 marker wrapped around it);
//   - -32005 ("rejected by transport") is ClassNotDelivered if the chain
//     holds a dial failure (*net.OpError with Op "dial", or
//     syscall.ECONNREFUSED), and ClassLost otherwise;
//   - everything else (io.EOF, io.ErrUnexpectedEOF, ECONNRESET, EPIPE,
//     mcp.ErrSessionMissing, unknown errors) is ClassLost: it may have
//     executed.
//
// A result with isError: true is not an error; the caller records it as
// ClassToolError.
func Classify(err error) replay.Class {
	switch {
	case err == nil:
		return replay.ClassNone
	case errors.Is(err, context.Canceled):
		return replay.ClassAborted
	case errors.Is(err, context.DeadlineExceeded):
		return replay.ClassTimedOut
	case errors.Is(err, ErrResultTooLarge):
		return replay.ClassTooLarge
	case errors.Is(err, mcp.ErrConnectionClosed):
		return replay.ClassNotDelivered
	case errors.As(err, new(*oauth.LoginRequiredError)), errors.As(err, new(*oauth.RefusedError)), errors.As(err, new(*oauth.TokenError)):
		// No token for it, or the server refused it (401, 403) before
		// acting on it.
		return replay.ClassNotDelivered
	}
	if code, ok := serverCode(err); ok {
		switch code {
		case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest,
			jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
			return replay.ClassRejected
		}
		return replay.ClassServerError
	}
	if errors.Is(err, &jsonrpc.Error{Code: codeRejectedByTransport}) && dialFailed(err) {
		return replay.ClassNotDelivered
	}
	return replay.ClassLost
}

// serverCode returns the code of the first *jsonrpc.Error in err's tree
// whose code is not codeRejectedByTransport. go-sdk wraps a JSON-RPC error
// from an HTTP error response together with the -32005 marker.
func serverCode(err error) (int64, bool) {
	switch e := err.(type) {
	case nil:
		return 0, false
	case *jsonrpc.Error:
		if e.Code != codeRejectedByTransport {
			return e.Code, true
		}
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if code, ok := serverCode(inner); ok {
				return code, true
			}
		}
		return 0, false
	}
	return serverCode(errors.Unwrap(err))
}

// dialFailed reports whether err's tree shows the connection was never
// established, so no byte of the request was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
