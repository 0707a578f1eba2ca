package failure_test

import (
	"testing"

	"github.com/mcpflow/mcpflow/internal/failure"
)

// TestClassPredicates: every failure class against every predicate; each
// class is exactly one of ran, may have run, not run. A class this mcpflow
// does not know (a newer one's) is judged as one that may have run.
func TestClassPredicates(t *testing.T) {
	type want struct {
		name                           string
		ran, mayHave, notRun, notDeliv bool
		budget, result, known          bool
	}
	cases := map[failure.Class]want{
		failure.None:         {"none", true, false, false, false, false, true, true},
		failure.ToolError:    {"tool_error", true, false, false, false, false, true, true},
		failure.Lost:         {"connection_lost", false, true, false, false, true, false, true},
		failure.NotDelivered: {"not_delivered", false, false, true, true, false, false, true},
		failure.Aborted:      {"aborted", false, true, false, false, true, false, true},
		failure.TimedOut:     {"timed_out", false, true, false, false, true, false, true},
		failure.Rejected:     {"rejected", false, false, true, false, false, false, true},
		failure.ServerError:  {"server_error", false, true, false, false, true, false, true},
		failure.TooLarge:     {"result_too_large", true, false, false, false, false, false, true},
		// Not a class of this mcpflow: may have run, and says its name.
		failure.Class("crash"): {"crash", false, true, false, false, true, false, false},
	}
	for _, c := range failure.All {
		if _, ok := cases[c]; !ok {
			t.Errorf("class %q is not in the table", string(c))
		}
	}
	if len(cases) != len(failure.All)+1 {
		t.Errorf("%d classes in the table, %d classes and one unknown", len(cases), len(failure.All))
	}
	for c, w := range cases {
		got := want{c.String(), c.Ran(), c.MayHaveRun(), c.NotRun(), c.NotDelivered(), c.CountsAgainstBudget(), c.ResultArrived(), c.Known()}
		if got != w {
			t.Errorf("%q: (name, ran, may have run, not run, not delivered, counts against budget, result arrived, known) = %v, want %v", string(c), got, w)
		}
		n := 0
		for _, p := range []bool{c.Ran(), c.MayHaveRun(), c.NotRun()} {
			if p {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%q is %d of ran, may have run, not run: want exactly one", string(c), n)
		}
	}
}
