package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/oauth"
	"github.com/mcpflow/mcpflow/replay"
)

// A server that wants a login mcpflow cannot get without a person (an
// *oauth.LoginRequiredError: none stored, the stored one expired and could
// not be refreshed, more scopes asked for) refuses the request before it
// acts on it: the initialize of a connect, a tools/list, or the POST of a
// call, read or prompt request. The step then ends with the run blocked
// (CodeLoginRequired), after one try — no reconnect loop, which would only
// be refused again — and resume runs it again once someone logged in:
//
//   - refused while connecting or listing tools, before the intent: nothing
//     is journaled, and resume starts the step afresh;
//   - refused after the intent, the attempt is journaled as not delivered
//     (replay.ClassNotDelivered), the invocation stays in flight (intent)
//     with the decision to send it again (loginOutcome), and resume follows
//     that decision (PlanFollow), as after any call that never left.
//
// A proxy session (Live) blocks nothing: its client is told, and decides
// what to do — it may send the call again itself — so a refused call ends
// failed, not run, and nothing sends it again.

// loginRequired is the *oauth.LoginRequiredError in err's chain, or nil.
func loginRequired(err error) *oauth.LoginRequiredError {
	var le *oauth.LoginRequiredError
	if errors.As(err, &le) {
		return le
	}
	return nil
}

// loginBlocked is the end of unit u's step when its server wants a login:
// the run blocked, with a message built from le's fields alone (never the
// server's words or the step's arguments).
func (r *runner) loginBlocked(u unit, le *oauth.LoginRequiredError) stepResult {
	if le.Server == "" {
		le = &oauth.LoginRequiredError{Server: u.Server, Why: le.Why, Scopes: le.Scopes}
	}
	msg := fmt.Sprintf("step %s: %v, then mcpflow resume", u.name(), le)
	if r.live {
		msg = fmt.Sprintf("step %s: %v", u.name(), le) // nothing to resume
	}
	return stepResult{status: journal.RunBlocked, err: &journal.Error{Code: CodeLoginRequired, Message: msg}}
}

// loginOutcome is the outcome to journal for an attempt the server refused
// for want of a login, and the cause of the attempt that follows once
// someone logged in (nil: its outcome is unknown — a read's failed —
// notCleared). The refused attempt did not run: sending it again is a
// first delivery (lossOutcome of ClassNotDelivered). But when an earlier
// attempt may have run, sending it again is a replay whatever this one
// proved, so the replay rule judges it, as after a lost connection, and
// resume judges the fresh view too (PlanFollow of ClassLost); the attempt
// is still journaled as not delivered.
func loginOutcome(inv *journal.Invocation) (journal.Outcome, *cause) {
	if !earlierMayHaveRun(inv) {
		return lossOutcome(inv, replay.ClassNotDelivered)
	}
	o, next := lossOutcome(inv, replay.ClassLost)
	o.Failure = replay.ClassNotDelivered
	return o, next
}

// loginRefused journals the outcome of an attempt the server refused for
// want of a login (loginOutcome) and ends the step: blocked for a login
// with the invocation in flight, or blocked on its unknown outcome when
// the replay rule does not clear sending it again.
func (r *runner) loginRefused(ctx context.Context, u unit, intent journal.Intent, le *oauth.LoginRequiredError, detail string) (turn, error) {
	if r.live {
		out := r.loginBlocked(u, le)
		o := journal.Outcome{State: journal.StateFailed, Error: out.err, Failure: replay.ClassNotDelivered, Detail: detail}
		if err := r.j.Finish(intent, o); err != nil {
			return turn{}, err
		}
		out.status, out.invocation, out.state = journal.RunFailed, intent.ID, journal.StateFailed
		return ending(out), nil
	}
	inv, err := r.j.Invocation(intent.ID)
	if err != nil {
		return turn{}, err
	}
	o, next := loginOutcome(inv)
	o.Detail = detail
	if err := r.j.Finish(intent, o); err != nil {
		return turn{}, err
	}
	r.decided(ctx, o.Decision)
	if next == nil {
		_, _, end := notCleared(inv)
		return turn{end: end}, nil
	}
	out := r.loginBlocked(u, le)
	out.invocation, out.state = intent.ID, journal.StateIntent
	return ending(out), nil
}
