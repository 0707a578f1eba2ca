package engine

import (
	"encoding/json"
	"testing"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// TestLoginOutcome: what is journaled for an attempt refused for want of
// a login, by what the attempts before it may have done, and how resume
// goes on from it (PlanResume). The refused attempt is always not
// delivered; sending it again is a first delivery unless an earlier
// attempt may have run, when the replay rule judges it.
func TestLoginOutcome(t *testing.T) {
	safe := json.RawMessage(`{"idempotentHint":true}`)
	trusted := journal.Trust{Server: true, Workspace: true}
	refused := journal.Attempt{Kind: journal.KindFirst} // its failure is what loginOutcome journals
	cases := []struct {
		name        string
		before      []journal.Attempt // ended before the refused one
		kind        journal.AttemptKind
		trust       journal.Trust
		annotations json.RawMessage
		state       journal.State
		verdict     verdict.Verdict
		next        causeKind // 0: none, the outcome is unknown
		plan        PlanKind
	}{
		{"first send", nil, journal.KindFirst, journal.Trust{}, nil,
			journal.StateIntent, verdict.FirstDelivery, causeNotDelivered, PlanFollow},
		{"after a first delivery", []journal.Attempt{{Kind: journal.KindFirst, Failure: replay.ClassNotDelivered}}, journal.KindFirstDelivery, journal.Trust{}, nil,
			journal.StateIntent, verdict.FirstDelivery, causeNotDelivered, PlanFollow},
		{"after a rejection", []journal.Attempt{{Kind: journal.KindFirst, Failure: replay.ClassRejected}}, journal.KindRetry, journal.Trust{}, nil,
			journal.StateIntent, verdict.FirstDelivery, causeNotDelivered, PlanFollow},
		{"replay after a lost call, safe", []journal.Attempt{{Kind: journal.KindFirst, Failure: replay.ClassLost}}, journal.KindReplay, trusted, safe,
			journal.StateIntent, verdict.Replay, causeLost, PlanFollow},
		{"replay after a lost call, budget spent", []journal.Attempt{
			{Kind: journal.KindFirst, Failure: replay.ClassLost}, {Kind: journal.KindReplay, Failure: replay.ClassLost},
			{Kind: journal.KindReplay, Failure: replay.ClassLost}}, journal.KindReplay, trusted, safe,
			journal.StateOutcomeUnknown, verdict.OutcomeUnknown, 0, PlanBlocked},
		{"retry after a timeout, untrusted now", []journal.Attempt{{Kind: journal.KindFirst, Failure: replay.ClassTimedOut}}, journal.KindRetry, journal.Trust{}, safe,
			journal.StateOutcomeUnknown, verdict.OutcomeUnknown, 0, PlanBlocked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inv := &journal.Invocation{Method: journal.MethodCall, State: journal.StateIntent, Trust: c.trust, Annotations: c.annotations}
			inv.Attempts = append(inv.Attempts, c.before...)
			a := refused
			a.Kind = c.kind
			inv.Attempts = append(inv.Attempts, a)
			for i := range inv.Attempts {
				inv.Attempts[i].N = i + 1
			}
			o, next := loginOutcome(inv)
			if o.Failure != replay.ClassNotDelivered || o.State != c.state || o.Decision == nil || o.Decision.Verdict != c.verdict {
				t.Fatalf("outcome %+v (decision %+v), want %s, not delivered, decided %s", o, o.Decision, c.state, c.verdict)
			}
			if got := causeKind(0); next != nil {
				got = next.kind
				if got != c.next {
					t.Errorf("next attempt's cause %d, want %d", got, c.next)
				}
			} else if c.next != 0 {
				t.Errorf("no next attempt, want cause %d", c.next)
			}
			// As the journal would hold it: resume goes on from there.
			last := &inv.Attempts[len(inv.Attempts)-1]
			last.Failure, last.EndedAt = o.Failure, &inv.CreatedAt
			inv.State, inv.Error = o.State, o.Error
			inv.Decisions = append(inv.Decisions, *o.Decision)
			p, err := PlanResume(inv)
			if err != nil || p.Kind != c.plan {
				t.Errorf("resume plan %+v, %v, want %s", p, err, c.plan)
			}
		})
	}
}
