package journal

import "github.com/mcpflow/mcpflow/internal/verdict"

// AttemptKind says why an attempt was sent. The names are journaled (an
// attempt's "kind") and shown; every front end words them its own way.
type AttemptKind string

const (
	// KindFirst: the invocation's first send, its intent (Begin).
	KindFirst AttemptKind = "first"
	// KindRetry: the step's retry: asked for another attempt after a
	// failure it covers (a tool error, a rejection, or — when the replay
	// rule clears it — a timeout or a server error).
	KindRetry AttemptKind = "retry"
	// KindReplay: sent again after the connection was lost (or mcpflow
	// stopped, or the call was aborted or timed out) while the call may
	// have run, because the replay rule cleared it.
	KindReplay AttemptKind = "replay"
	// KindFirstDelivery: the previous attempt provably did not run (it
	// never left this process, or the server rejected it before running
	// it): this one is its first delivery, not a replay.
	KindFirstDelivery AttemptKind = "first_delivery"
	// KindOperatorRetry: an operator approved sending the call again
	// (retry_approved: resume --retry-failed, journal resolve --as retry,
	// the web UI's retry).
	KindOperatorRetry AttemptKind = "operator_retry"
	// KindContinuation: the previous attempt's result asked for input
	// (input_required); this one carries the answers and the server's
	// request state. The tool had not run: it is not a replay.
	KindContinuation AttemptKind = "continuation"
)

// AttemptKinds is every kind, in the order above.
var AttemptKinds = []AttemptKind{KindFirst, KindRetry, KindReplay, KindFirstDelivery, KindOperatorRetry, KindContinuation}

func (k AttemptKind) String() string { return string(k) }

// Known reports whether k is one of AttemptKinds.
func (k AttemptKind) Known() bool {
	for _, v := range AttemptKinds {
		if k == v {
			return true
		}
	}
	return false
}

// Sent says why attempt i (from 0) of inv was sent: the kind it was
// journaled with. An attempt journaled before kinds were has none, and is
// not rewritten: its kind is read from what the journal holds of it — the
// first attempt is KindFirst; a later one is what the decisions journaled
// on the attempt before it cleared (an operator's approval, a retry, a
// first delivery, a replay), else its replay flag, else a re-send on
// resume of a call that provably did not run (KindFirstDelivery).
func (inv *Invocation) Sent(i int) AttemptKind {
	a := &inv.Attempts[i]
	if a.Kind != "" {
		return a.Kind
	}
	if i == 0 {
		return KindFirst
	}
	prev := inv.Attempts[i-1].N
	var retry, first, replay bool
	for _, d := range inv.Decisions {
		if d.Attempt != prev {
			continue
		}
		switch {
		case d.View == verdict.Operator:
			return KindOperatorRetry
		case d.Verdict == verdict.Continue:
			return KindContinuation
		case d.Verdict == verdict.Retry:
			retry = true
		case d.Verdict == verdict.FirstDelivery:
			first = true
		case d.Verdict == verdict.Replay:
			replay = true
		}
	}
	switch {
	case retry:
		// A retry carried out on resume journals a replay decision on the
		// fresh view after it: it is still the step's retry.
		return KindRetry
	case first:
		return KindFirstDelivery
	case replay, a.Replay:
		return KindReplay
	}
	return KindFirstDelivery
}

// Tally is how often an invocation was sent, and why: its attempts counted
// by kind (Sent), and those that count against the replay budget.
type Tally struct {
	Attempts        int
	Retries         int // KindRetry: the step's retry: asked
	Replays         int // KindReplay: the replay rule cleared a re-send
	FirstDeliveries int // KindFirstDelivery
	OperatorRetries int // KindOperatorRetry: an operator approved it
	Continuations   int // KindContinuation: sent with the answers asked for
	// AgainstBudget counts the sends of a call that may have run, which
	// count against the replay budget (replay.MaxReplays), whoever asked
	// for them: every attempt but a first send or a first delivery that
	// follows an attempt whose failure counts against the budget
	// (failure.Class.CountsAgainstBudget), or one that provably did not
	// run (NotRun) after such an attempt.
	AgainstBudget int
}

// Tally counts inv's attempts: the one count of sends, by kind, that the
// engine (the retry and replay budgets), the API and every view use.
func (inv *Invocation) Tally() Tally {
	t := Tally{Attempts: len(inv.Attempts)}
	mayHaveRun := false // an attempt before the previous one may have run
	for i := range inv.Attempts {
		switch inv.Sent(i) {
		case KindRetry:
			t.Retries++
		case KindReplay:
			t.Replays++
		case KindFirstDelivery:
			t.FirstDeliveries++
		case KindOperatorRetry:
			t.OperatorRetries++
		case KindContinuation:
			t.Continuations++
		}
		if i == 0 {
			continue
		}
		prev := inv.Attempts[i-1].Failure
		if k := inv.Sent(i); k != KindFirst && k != KindFirstDelivery &&
			(prev.CountsAgainstBudget() || prev.NotRun() && mayHaveRun) {
			t.AgainstBudget++
		}
		mayHaveRun = mayHaveRun || prev.CountsAgainstBudget()
	}
	return t
}
