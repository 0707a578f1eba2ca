package advice_test

import (
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/advice"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/service"
)

// TestBlockedForALogin: a run blocked for a server's login has nothing to
// resolve: the advice is its error, which names the login, and resume —
// unless an invocation of it waits for an operator too.
func TestBlockedForALogin(t *testing.T) {
	id, inv := journal.NewID(), journal.NewID()
	short := id.Short()
	login := &journal.Error{Code: engine.CodeLoginRequired, Message: `step a: server "s" needs a login (none is stored): run mcpflow servers login s, then mcpflow resume`}
	head := "mcpflow: run " + short + " is blocked: MCPFLOW_LOGIN_REQUIRED: step a: server \"s\" needs a login (none is stored): run mcpflow servers login s, then mcpflow resume\n"
	refused := journal.Invocation{ID: inv, Step: "a", Item: -1, Server: "s", Tool: "t", State: journal.StateIntent,
		Attempts: []journal.Attempt{{N: 1, Failure: replay.ClassNotDelivered}}}
	unknown := journal.Invocation{ID: inv, Step: "b", Item: -1, Server: "s", Tool: "t", State: journal.StateOutcomeUnknown}
	for _, c := range []struct {
		name string
		invs []journal.Invocation
		want string
	}{
		{"at connect", nil, head +
			"  inspect:  mcpflow runs show " + short + "\n" +
			"  continue: mcpflow resume " + short + ", once logged in\n"},
		{"at the call", []journal.Invocation{refused}, head +
			"  inspect:  mcpflow runs show " + short + "\n" +
			"  continue: mcpflow resume " + short + ", once logged in\n"},
		{"and an outcome unknown", []journal.Invocation{unknown}, head +
			"  waiting for you: invocation " + inv.Short() + ", step b, s/t (outcome_unknown)\n" +
			"  inspect:  mcpflow runs show " + short + "\n" +
			"  resolve:  mcpflow journal resolve " + inv.Short() + " --as completed --result FILE | --as failed --reason TEXT | --as retry --reason TEXT\n" +
			"  continue: mcpflow resume " + short + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			advice.Blocked(&b, &service.Report{Run: &journal.Run{ID: id, Status: journal.RunBlocked, Error: login}, Invocations: c.invs})
			if b.String() != c.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), c.want)
			}
		})
	}
}
