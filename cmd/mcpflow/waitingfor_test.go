package main

import (
	"testing"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
)

// TestWaitingFor: the WAITING FOR column of runs list, by why the run is
// blocked; an invocation to resolve comes before a login.
func TestWaitingFor(t *testing.T) {
	t.Parallel()
	login := &journal.Error{Code: engine.CodeLoginRequired, Message: `step a: server "s" needs a login (none is stored): run mcpflow servers login s, then mcpflow resume`}
	unknown := journal.Invocation{ID: journal.NewID(), Step: "b", Item: -1, State: journal.StateOutcomeUnknown}
	for _, c := range []struct {
		name   string
		status journal.RunStatus
		err    *journal.Error
		invs   []journal.Invocation
		want   string
	}{
		{"login", journal.RunBlocked, login, nil, "a server login"},
		{"login and an outcome unknown", journal.RunBlocked, login, []journal.Invocation{unknown}, "resolution of b"},
		{"outcome unknown", journal.RunBlocked, &journal.Error{Code: replay.Code}, []journal.Invocation{unknown}, "resolution of b"},
		{"failed", journal.RunFailed, &journal.Error{Code: engine.CodeServerUnavailable}, nil, ""},
	} {
		run := &journal.Run{ID: journal.NewID(), Status: c.status, Error: c.err}
		if got := waitingFor(run, c.invs); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
