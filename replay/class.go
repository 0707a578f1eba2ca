package replay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Class is what a failure proves about execution.
type Class uint8

const (
	ClassNone         Class = iota // no failure: a result arrived (isError false)
	ClassToolError                 // a result arrived with isError: true; the tool executed
	ClassLost                      // connection lost after the request may have been delivered
	ClassNotDelivered              // provably never left this process
	ClassAborted                   // cancelled by the user (context.Canceled)
	ClassTimedOut                  // deadline exceeded
	ClassRejected                  // JSON-RPC error proving the tool did not run
	ClassServerError               // any other JSON-RPC error: the tool may have executed
)

var classNames = [...]string{
	ClassNone:         "none",
	ClassToolError:    "tool_error",
	ClassLost:         "connection_lost",
	ClassNotDelivered: "not_delivered",
	ClassAborted:      "aborted",
	ClassTimedOut:     "timed_out",
	ClassRejected:     "rejected",
	ClassServerError:  "server_error",
}

// String returns the stable snake_case name, e.g. "connection_lost".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// ParseClass is the inverse of Class.String. An unknown name is an error
// wrapping ErrUnknownClass.
func ParseClass(s string) (Class, error) {
	for c, name := range classNames {
		if name == s {
			return Class(c), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownClass, s)
}

// MayHaveExecuted reports whether the side effect may have happened without
// a result arriving: ClassLost, ClassAborted, ClassTimedOut, ClassServerError.
func (c Class) MayHaveExecuted() bool {
	switch c {
	case ClassLost, ClassAborted, ClassTimedOut, ClassServerError:
		return true
	}
	return false
}

// Executed reports whether a result arrived: ClassNone or ClassToolError.
func (c Class) Executed() bool { return c == ClassNone || c == ClassToolError }

// codeRejectedByTransport is the JSON-RPC code of go-sdk's internal
// jsonrpc2.ErrRejected ("rejected by transport"). In v1.8.0 the streamable
// HTTP client wraps every http.Client.Do error in it, under the comment "Any
// error from client.Do means the request didn't reach the server". That
// comment is wrong: Do also fails when the connection breaks after the POST
// was written and the server's handler has already run. So this code means
// "may have been delivered" unless the chain shows a dial failure.
const codeRejectedByTransport = -32005

// Classify maps an error returned by go-sdk v1.8.0's ClientSession.CallTool
// to a Class; nil is ClassNone. In order:
//
//   - context.Canceled is ClassAborted, context.DeadlineExceeded is
//     ClassTimedOut (checked first: the SDK may wrap them in anything);
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
func Classify(err error) Class {
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, context.Canceled):
		return ClassAborted
	case errors.Is(err, context.DeadlineExceeded):
		return ClassTimedOut
	case errors.Is(err, mcp.ErrConnectionClosed):
		return ClassNotDelivered
	}
	if code, ok := serverCode(err); ok {
		switch code {
		case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest,
			jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
			return ClassRejected
		}
		return ClassServerError
	}
	if errors.Is(err, &jsonrpc.Error{Code: codeRejectedByTransport}) && dialFailed(err) {
		return ClassNotDelivered
	}
	return ClassLost
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
