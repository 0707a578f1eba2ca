package replay

import (
	"fmt"
	"strconv"
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
	ClassTooLarge                  // the server answered (the tool ran) with a message larger than the transport accepts
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
	ClassTooLarge:     "result_too_large",
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

// Every class is exactly one of Ran, MayHaveRun and NotRun: what the
// attempt loop, the resume plan and the display all go by.

// Ran reports whether the tool ran and its server said so: a result
// arrived (ClassNone, ClassToolError), or an answer too large to read
// (ClassTooLarge). Sending the call again repeats what it did.
func (c Class) Ran() bool { return c == ClassNone || c == ClassToolError || c == ClassTooLarge }

// MayHaveRun reports whether the side effect may have happened without a
// result arriving: ClassLost, ClassAborted, ClassTimedOut,
// ClassServerError. Sending the call again is a replay: only the replay
// rule may clear it, and it counts against the replay budget.
func (c Class) MayHaveRun() bool {
	switch c {
	case ClassLost, ClassAborted, ClassTimedOut, ClassServerError:
		return true
	}
	return false
}

// NotRun reports whether the call provably did not run: it never left
// this process (ClassNotDelivered), or the server refused it before
// running it (ClassRejected). Sending it again is a first delivery.
func (c Class) NotRun() bool { return c == ClassNotDelivered || c == ClassRejected }

// ResultArrived reports whether the call's result arrived, to be kept
// and used: ClassNone or ClassToolError.
func (c Class) ResultArrived() bool { return c == ClassNone || c == ClassToolError }
