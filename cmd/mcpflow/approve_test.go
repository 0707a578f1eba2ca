package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestApprovalCommandsFillTheirOptions: the cobra glue of approve and
// reject only fills the options; the decision is the one thing between
// them that differs.
func TestApprovalCommandsFillTheirOptions(t *testing.T) {
	for _, tc := range []struct {
		verb string
		want journal.ApprovalState
	}{
		{"approve", journal.ApprovalApproved},
		{"reject", journal.ApprovalRejected},
	} {
		var got *approvalOptions
		runF := func(_ context.Context, o *approvalOptions) error { got = o; return nil }
		cmd := newApproveCommand(&globals{}, runF)
		if tc.verb == "reject" {
			cmd = newRejectCommand(&globals{}, runF)
		}
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"01a2375e", "deploy", "--reason", "ticket 7"})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%s: %v", tc.verb, err)
		}
		if got == nil || got.as != tc.want || got.run != "01a2375e" || got.step != "deploy" || got.reason != "ticket 7" || got.Out != &out {
			t.Errorf("%s: options %+v", tc.verb, got)
		}

		got = nil
		cmd.SetArgs([]string{"01a2375e"})
		err := cmd.Execute()
		if codeFor(err) != exitUsage || err.Error() != "give RUN_ID and STEP, as the blocked run's message names them (blocked runs: mcpflow runs list --status blocked)" || got != nil {
			t.Errorf("%s with one argument: exit %d, %v", tc.verb, codeFor(err), err)
		}
	}
}
