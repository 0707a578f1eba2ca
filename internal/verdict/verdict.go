// Package verdict names what mcpflow decided about sending an invocation
// again, and which view of the tool it judged. The names are journaled and
// compared, so they are defined once, here: package replay decides with
// them and package journal stores them, and neither imports the other.
package verdict

// Verdict is what was decided about an invocation that failed.
type Verdict string

const (
	// Replay: the replay rule cleared sending a call that may have run again.
	Replay Verdict = "replay"
	// OutcomeUnknown: the call may have run and must not be sent again
	// until an operator resolves it.
	OutcomeUnknown Verdict = "outcome_unknown"
	// NotApplicable: the failure is not a connection loss; the replay rule
	// does not apply.
	NotApplicable Verdict = "not_applicable"
	// FirstDelivery: the call provably never left this process; sending it
	// after reconnecting is its first delivery, not a replay.
	FirstDelivery Verdict = "first_delivery"
	// Retry: a failure the step's retry asks to retry is retried.
	Retry Verdict = "retry"
	// NotRetried: a failure the step's retry asks to retry is not, and the
	// reason says why.
	NotRetried Verdict = "not_retried"
	// OperatorRetry: an operator approved sending the call again
	// (retry_approved); journaled with the attempt it sends, from the
	// Operator view. (Journals written before it have Replay there.)
	OperatorRetry Verdict = "operator_retry"
	// Continue: the call's result asked for input (MCP multi-round-trip
	// requests: input_required); once every request is answered, the call
	// is sent again with the answers and the server's request state, under
	// the same idempotency key: a continuation of the call, not a replay.
	Continue Verdict = "continue"
)

func (v Verdict) String() string { return string(v) }

// View says which view of a tool a decision judged.
type View string

const (
	// SendTime is the snapshot journaled with the attempt that was sent.
	SendTime View = "send_time"
	// Rediscovered is the tool as listed again after reconnecting, with
	// trust read afresh.
	Rediscovered View = "rediscovered"
	// Current is the tool and trust as they are now, on a live session.
	Current View = "current"
	// Operator is a person's resolution.
	Operator View = "operator"
)

func (v View) String() string { return string(v) }
