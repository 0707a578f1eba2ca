// Package failure names what a failed tools/call proves about execution:
// the failure class. The class is journaled on every attempt and judged by
// the replay rule, so it is defined once, here: package journal stores it
// (journal.Attempt.Failure), package replay decides with it (replay.Class
// is this type), and neither imports the other. Its predicates answer the
// questions the attempt loop, the resume plan and every display ask of a
// failure; nothing else tests a class by name.
//
// # Caveats
//
// A Class is its journaled name, a string, so that a record written by a
// newer mcpflow, with a class this one does not know, reads back and is
// written again unchanged. An unknown class is judged as one after which
// the call may have run ([Class.Known] tells them apart): the safe side.
// The empty class is [None]: no failure, a result arrived.
package failure

// Class is what a failure proves about execution, by its stable
// snake_case name as the journal stores it ("connection_lost", …; "" for
// None).
type Class string

const (
	None         Class = ""                 // no failure: a result arrived (isError false)
	ToolError    Class = "tool_error"       // a result arrived with isError: true; the tool executed
	Lost         Class = "connection_lost"  // connection lost after the request may have been delivered
	NotDelivered Class = "not_delivered"    // provably never left this process
	Aborted      Class = "aborted"          // cancelled by the user (context.Canceled)
	TimedOut     Class = "timed_out"        // deadline exceeded
	Rejected     Class = "rejected"         // JSON-RPC error proving the tool did not run
	ServerError  Class = "server_error"     // any other JSON-RPC error: the tool may have executed
	TooLarge     Class = "result_too_large" // the server answered (the tool ran) with a message larger than the transport accepts
)

// All is every class this mcpflow knows, None first.
var All = []Class{None, ToolError, Lost, NotDelivered, Aborted, TimedOut, Rejected, ServerError, TooLarge}

// String returns the class's name; "none" for None.
func (c Class) String() string {
	if c == None {
		return "none"
	}
	return string(c)
}

// Known reports whether c is one of the classes of All.
func (c Class) Known() bool {
	for _, k := range All {
		if c == k {
			return true
		}
	}
	return false
}

// Every known class is exactly one of Ran, MayHaveRun and NotRun.

// Ran reports whether the tool ran and its server said so: a result
// arrived (None, ToolError), or an answer too large to read (TooLarge).
// Sending the call again repeats what it did.
func (c Class) Ran() bool { return c == None || c == ToolError || c == TooLarge }

// MayHaveRun reports whether the side effect may have happened without a
// result arriving: Lost, Aborted, TimedOut, ServerError, and any class
// this mcpflow does not know. Sending the call again repeats what it may
// have done: only the replay rule may clear it.
func (c Class) MayHaveRun() bool {
	switch c {
	case Lost, Aborted, TimedOut, ServerError:
		return true
	}
	return !c.Known()
}

// NotRun reports whether the call provably did not run: it never left
// this process (NotDelivered), or the server refused it before running it
// (Rejected). Sending it again is a first delivery.
func (c Class) NotRun() bool { return c == NotDelivered || c == Rejected }

// NotDelivered reports whether the call provably never left this process
// (NotDelivered): the connection is to be made again and the call sent
// after it, as a first delivery, without the replay rule.
func (c Class) NotDelivered() bool { return c == NotDelivered }

// CountsAgainstBudget reports whether sending the call again after a
// failure of class c counts against the invocation's replay budget: it is
// a send of a call that may have run (MayHaveRun), whoever asks for it —
// the replay rule after a lost connection, a step's retry:, an operator.
func (c Class) CountsAgainstBudget() bool { return c.MayHaveRun() }

// ResultArrived reports whether the call's result arrived, to be kept
// and used: None or ToolError.
func (c Class) ResultArrived() bool { return c == None || c == ToolError }
