package replay

import "errors"

// Code is the stable, machine-readable code of [ErrOutcomeUnknown].
const Code = "MCPFLOW_OUTCOME_UNKNOWN"

// Message is the fixed text of [ErrOutcomeUnknown]. It never varies: tool
// arguments and upstream error text stay in the journal, for the operator.
const Message = "the tool call may have completed and must not be retried automatically; " +
	"an operator must resolve it with `mcpflow journal resolve`"

// ErrOutcomeUnknown is returned for an invocation whose outcome is unknown.
// Its text is Code + ": " + Message; compare with errors.Is.
var ErrOutcomeUnknown = errors.New(Code + ": " + Message)

var (
	// ErrHintNotBool is returned by ParseAnnotations when a hint field is
	// present with a value that is not true or false (null included).
	ErrHintNotBool = errors.New("replay: annotation hint is not a boolean")

	// ErrUnknownClass is returned by ParseClass for a name it does not know.
	ErrUnknownClass = errors.New("replay: unknown failure class")
)
