package journal

import "fmt"

// State is the state of an invocation. All states and their legal
// transitions are defined here and nowhere else.
type State uint8

const (
	stateInvalid State = iota
	// StateIntent: the intent is durable; the call is about to be sent, is in
	// flight, or was interrupted (crash or lost connection) with no outcome yet.
	StateIntent
	// StateCompleted: a result arrived (isError results included) or an
	// operator resolved the invocation as completed.
	StateCompleted
	// StateFailed: the call failed in a way that is final for this
	// invocation, or an operator resolved it as failed.
	StateFailed
	// StateOutcomeUnknown: the call may have run and must not be re-sent
	// automatically; an operator must resolve it.
	StateOutcomeUnknown
	// StateAborted: the user cancelled while the call was in flight.
	StateAborted
	// StateTimedOut: the step's timeout expired while the call was in flight.
	StateTimedOut
	// StateSkipped: the step's condition was false; nothing was sent.
	StateSkipped
	// StateRetryApproved: an operator approved sending the call again; the
	// next resume starts a new attempt.
	StateRetryApproved
	numStates
)

var stateNames = [numStates]string{
	stateInvalid:        "invalid",
	StateIntent:         "intent",
	StateCompleted:      "completed",
	StateFailed:         "failed",
	StateOutcomeUnknown: "outcome_unknown",
	StateAborted:        "aborted",
	StateTimedOut:       "timed_out",
	StateSkipped:        "skipped",
	StateRetryApproved:  "retry_approved",
}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// ParseState parses the name printed by String.
func ParseState(name string) (State, error) {
	for s := StateIntent; s < numStates; s++ {
		if stateNames[s] == name {
			return s, nil
		}
	}
	return stateInvalid, fmt.Errorf("unknown invocation state %q (want one of %s)", name, stateList())
}

func stateList() string {
	out := ""
	for s := StateIntent; s < numStates; s++ {
		if out != "" {
			out += ", "
		}
		out += stateNames[s]
	}
	return out
}

// Unsettled reports whether an invocation in state s may still have an
// effect nobody has accounted for: in flight or interrupted (intent), may
// have run (outcome_unknown), or approved for a re-send (retry_approved). A
// run cannot succeed, and Prune keeps a run, while one of its invocations
// is unsettled.
func (s State) Unsettled() bool {
	return s == StateIntent || s == StateOutcomeUnknown || s == StateRetryApproved
}

// waitsForResolution reports whether an operator may resolve an invocation in s.
func (s State) waitsForResolution() bool {
	return s == StateOutcomeUnknown || s == StateAborted || s == StateTimedOut
}

// retryable reports whether an operator may approve sending an invocation
// in s again although it does not wait for a resolution: it failed, or it
// completed (the caller checks that it was a tool error).
func (s State) retryable() bool { return s == StateFailed || s == StateCompleted }

// resolvable reports whether an operator may resolve an invocation from
// one state to another. completed → retry_approved (a tool error retried
// by an operator) is outside the transition table: it is legal only for a
// tool error, which Resolve checks.
func resolvable(from, as State) bool {
	if from == StateCompleted && as == StateRetryApproved {
		return true
	}
	return CanTransition(from, as) && (from.waitsForResolution() || as == StateRetryApproved && from.retryable())
}

// isResolution reports whether an operator may resolve an invocation as s.
func (s State) isResolution() bool {
	return s == StateCompleted || s == StateFailed || s == StateRetryApproved
}

// transitions lists every legal change of state. Creation is from
// stateInvalid. StateIntent → StateIntent records a new attempt (a replay or
// a retry) of the same invocation.
var transitions = map[State][]State{
	stateInvalid:        {StateIntent, StateSkipped},
	StateIntent:         {StateIntent, StateCompleted, StateFailed, StateOutcomeUnknown, StateAborted, StateTimedOut},
	StateOutcomeUnknown: {StateCompleted, StateFailed, StateRetryApproved},
	StateAborted:        {StateCompleted, StateFailed, StateRetryApproved, StateIntent, StateOutcomeUnknown},
	StateTimedOut:       {StateCompleted, StateFailed, StateRetryApproved, StateIntent, StateOutcomeUnknown},
	StateFailed:         {StateIntent, StateRetryApproved},
	StateRetryApproved:  {StateIntent},
}

// CanTransition reports whether an invocation may move from one state to another.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

func checkTransition(id ID, from, to State) error {
	if !CanTransition(from, to) {
		return fmt.Errorf("invocation %s: %s → %s: %w", id.Short(), from, to, ErrTransition)
	}
	return nil
}

func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *State) UnmarshalText(b []byte) error {
	v, err := ParseState(string(b))
	*s = v
	return err
}

// RunStatus is the status of a run.
type RunStatus uint8

const (
	runInvalid RunStatus = iota
	// RunRunning: the run started and has not finished (or its process died).
	RunRunning
	// RunSucceeded: every step completed or was skipped.
	RunSucceeded
	// RunFailed: a step failed; resume may continue it.
	RunFailed
	// RunBlocked: an invocation's outcome is unknown; the run waits for an operator.
	RunBlocked
	// RunCancelled: the user interrupted the run.
	RunCancelled
	numRunStatuses
)

var runStatusNames = [numRunStatuses]string{
	runInvalid:   "invalid",
	RunRunning:   "running",
	RunSucceeded: "succeeded",
	RunFailed:    "failed",
	RunBlocked:   "blocked",
	RunCancelled: "cancelled",
}

func (s RunStatus) String() string {
	if s < numRunStatuses {
		return runStatusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// ParseRunStatus parses the name printed by String.
func ParseRunStatus(name string) (RunStatus, error) {
	for s := RunRunning; s < numRunStatuses; s++ {
		if runStatusNames[s] == name {
			return s, nil
		}
	}
	return runInvalid, fmt.Errorf("unknown run status %q (want running, succeeded, failed, blocked or cancelled)", name)
}

// runTransitions: a run may be resumed (back to running) unless it succeeded.
var runTransitions = map[RunStatus][]RunStatus{
	runInvalid:   {RunRunning},
	RunRunning:   {RunRunning, RunSucceeded, RunFailed, RunBlocked, RunCancelled},
	RunFailed:    {RunRunning},
	RunBlocked:   {RunRunning},
	RunCancelled: {RunRunning},
}

// CanTransitionRun reports whether a run may move from one status to another.
func CanTransitionRun(from, to RunStatus) bool {
	for _, s := range runTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Valid reports whether s is one of the states (the zero State is not).
func (s State) Valid() bool { return s > stateInvalid && s < numStates }

// Valid reports whether s is one of the run statuses (the zero RunStatus
// is not).
func (s RunStatus) Valid() bool { return s > runInvalid && s < numRunStatuses }

// Finished reports whether the run is not running.
func (s RunStatus) Finished() bool { return s != RunRunning && s != runInvalid }

func (s RunStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *RunStatus) UnmarshalText(b []byte) error {
	v, err := ParseRunStatus(string(b))
	*s = v
	return err
}

// ApprovalState is where a step's approval gate stands.
type ApprovalState uint8

const (
	approvalInvalid ApprovalState = iota
	// ApprovalPending: the run reached the step and waits for a decision.
	ApprovalPending
	// ApprovalApproved: an operator approved the step; it runs on resume.
	ApprovalApproved
	// ApprovalRejected: an operator rejected the step; it fails on resume
	// without sending anything.
	ApprovalRejected
	numApprovalStates
)

var approvalStateNames = [numApprovalStates]string{
	approvalInvalid:  "invalid",
	ApprovalPending:  "pending",
	ApprovalApproved: "approved",
	ApprovalRejected: "rejected",
}

func (s ApprovalState) String() string {
	if s < numApprovalStates {
		return approvalStateNames[s]
	}
	return fmt.Sprintf("approval(%d)", uint8(s))
}

// ParseApprovalState parses the name printed by String.
func ParseApprovalState(name string) (ApprovalState, error) {
	for s := ApprovalPending; s < numApprovalStates; s++ {
		if approvalStateNames[s] == name {
			return s, nil
		}
	}
	return approvalInvalid, fmt.Errorf("unknown approval state %q (want pending, approved or rejected)", name)
}

// Decided reports whether an operator decided the gate.
func (s ApprovalState) Decided() bool { return s == ApprovalApproved || s == ApprovalRejected }

func (s ApprovalState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *ApprovalState) UnmarshalText(b []byte) error {
	v, err := ParseApprovalState(string(b))
	*s = v
	return err
}

// States lists every invocation state, in order.
func States() []State {
	out := make([]State, 0, numStates-1)
	for s := StateIntent; s < numStates; s++ {
		out = append(out, s)
	}
	return out
}

// RunStatuses lists every run status, in order.
func RunStatuses() []RunStatus {
	out := make([]RunStatus, 0, numRunStatuses-1)
	for s := RunRunning; s < numRunStatuses; s++ {
		out = append(out, s)
	}
	return out
}
