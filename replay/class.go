package replay

import (
	"fmt"

	"github.com/mcpflow/mcpflow/internal/failure"
)

// Class is what a failure proves about execution. It is internal/failure's
// class, defined once there so that the journal, which stores it, and this
// package, which decides with it, share it without importing each other;
// its predicates (Ran, MayHaveRun, NotRun, NotDelivered,
// CountsAgainstBudget, ResultArrived) are what the attempt loop, the
// resume plan and the display all go by.
type Class = failure.Class

const (
	ClassNone         = failure.None         // no failure: a result arrived (isError false)
	ClassToolError    = failure.ToolError    // a result arrived with isError: true; the tool executed
	ClassLost         = failure.Lost         // connection lost after the request may have been delivered
	ClassNotDelivered = failure.NotDelivered // provably never left this process
	ClassAborted      = failure.Aborted      // cancelled by the user (context.Canceled)
	ClassTimedOut     = failure.TimedOut     // deadline exceeded
	ClassRejected     = failure.Rejected     // JSON-RPC error proving the tool did not run
	ClassServerError  = failure.ServerError  // any other JSON-RPC error: the tool may have executed
	ClassTooLarge     = failure.TooLarge     // the server answered (the tool ran) with a message larger than the transport accepts
)

// ParseClass is the inverse of Class.String ("none" is ClassNone). A name
// this mcpflow does not know is an error wrapping ErrUnknownClass.
func ParseClass(s string) (Class, error) {
	for _, c := range failure.All {
		if c.String() == s {
			return c, nil
		}
	}
	return ClassNone, fmt.Errorf("%w: %q", ErrUnknownClass, s)
}
