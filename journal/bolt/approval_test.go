package bolt_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

func TestApprovalRequestedThenDecided(t *testing.T) {
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	journaltest.EachLocation(t, func(t *testing.T, path string) {
		j := journaltest.OpenStore(t, path, &journal.Options{Now: c.now})
		run := newRun(t, j)
		if _, err := j.RequestApproval(run, "deploy", "Roll out?"); err != nil {
			t.Fatal(err)
		}
		if err := j.SetRunStatus(run, journal.RunBlocked, &journal.Error{Code: "X", Message: "waits"}); err != nil {
			t.Fatal(err)
		}
		// A second request (a resume reaching the gate again) changes nothing.
		if _, err := j.RequestApproval(run, "deploy", "another message"); err != nil {
			t.Fatal(err)
		}
		r, _ := j.Run(run)
		if len(r.Approvals) != 1 || r.Approvals[0].Message != "Roll out?" || r.Approvals[0].State != journal.ApprovalPending || r.Approvals[0].At != nil {
			t.Fatalf("approvals %+v, want one pending with the first message", r.Approvals)
		}
		requested := r.Approvals[0].RequestedAt
		if err := j.SetRunStatus(run, journal.RunRunning, nil); err != nil {
			t.Fatal(err)
		}
		if err := j.SetRunStatus(run, journal.RunSucceeded, nil); !errors.Is(err, journal.ErrTransition) || !strings.Contains(err.Error(), "step deploy waits for approval") {
			t.Fatalf("succeeded while waiting: %v", err)
		}
		if err := j.SetRunStatus(run, journal.RunBlocked, nil); err != nil {
			t.Fatal(err)
		}

		a, err := j.DecideApproval(run, "deploy", journal.ApprovalApproved, "alice", "change ticket 42")
		if err != nil {
			t.Fatal(err)
		}
		if a.State != journal.ApprovalApproved || a.By != "alice" || a.Reason != "change ticket 42" || a.At == nil || !a.At.After(requested) {
			t.Fatalf("approval %+v", a)
		}
		_, err = j.DecideApproval(run, "deploy", journal.ApprovalRejected, "bob", "")
		if !errors.Is(err, journal.ErrTransition) || !strings.Contains(err.Error(), "step deploy was already approved by alice at "+a.At.Format(time.RFC3339)) {
			t.Fatalf("second decision: %v", err)
		}

		// Durable: a new open reads the decision back.
		journaltest.CheckAndClose(t, j)
		j = journaltest.OpenStore(t, path, nil)
		r, err = j.Run(run)
		if err != nil {
			t.Fatal(err)
		}
		got := r.Approval("deploy")
		if got == nil || got.State != journal.ApprovalApproved || got.By != "alice" || !got.At.Equal(*a.At) || len(r.PendingApprovals()) != 0 {
			t.Fatalf("after reopening: %+v", r.Approvals)
		}
	})
}

// A decision made before the run reaches the step: journaled in advance,
// and the run that reaches the step finds it in the same transaction that
// records the request.
func TestDecideInAdvance(t *testing.T) {
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	journaltest.EachLocation(t, func(t *testing.T, path string) {
		j := journaltest.OpenStore(t, path, &journal.Options{Now: c.now})
		run := newRun(t, j)
		a, err := j.DecideInAdvance(run, "deploy", journal.ApprovalApproved, "alice", "ticket 42")
		if err != nil {
			t.Fatal(err)
		}
		if a.State != journal.ApprovalApproved || !a.InAdvance || a.Reached() || a.By != "alice" || a.At == nil || a.Reason != "ticket 42" {
			t.Fatalf("approval in advance %+v", a)
		}
		r, _ := j.Run(run)
		if len(r.Approvals) != 1 || len(r.PendingApprovals()) != 0 {
			t.Fatalf("approvals %+v", r.Approvals)
		}
		_, err = j.DecideInAdvance(run, "deploy", journal.ApprovalRejected, "bob", "")
		if !errors.Is(err, journal.ErrTransition) || !strings.Contains(err.Error(), "step deploy was already approved in advance by alice at ") {
			t.Fatalf("second decision: %v", err)
		}

		// The run reaches the step: the gate is marked reached, the
		// decision kept; reaching it again changes nothing.
		got, err := j.RequestApproval(run, "deploy", "Roll out?")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != journal.ApprovalApproved || !got.InAdvance || !got.Reached() || got.Message != "Roll out?" || got.RequestedAt.Before(*a.At) {
			t.Fatalf("reached %+v", got)
		}
		again, err := j.RequestApproval(run, "deploy", "other")
		if err != nil || !again.RequestedAt.Equal(got.RequestedAt) || again.Message != got.Message || again.State != got.State {
			t.Fatalf("reached again: %+v, %v; want %+v", again, err, got)
		}

		// Rejected in advance: the run that reaches the step is told.
		if _, err := j.DecideInAdvance(run, "notify", journal.ApprovalRejected, "bob", "not today"); err != nil {
			t.Fatal(err)
		}
		if got, err := j.RequestApproval(run, "notify", ""); err != nil || got.State != journal.ApprovalRejected || got.By != "bob" {
			t.Fatalf("rejected in advance: %+v, %v", got, err)
		}

		// A gate the run reached meanwhile is decided as it waits: not in
		// advance.
		if _, err := j.RequestApproval(run, "later", ""); err != nil {
			t.Fatal(err)
		}
		if got, err := j.DecideInAdvance(run, "later", journal.ApprovalApproved, "carol", ""); err != nil || got.InAdvance || !got.Reached() {
			t.Fatalf("decided while waiting: %+v, %v", got, err)
		}

		// DecideApproval still refuses a step the run has not reached; a
		// run that succeeded takes no decision in advance.
		if _, err := j.DecideApproval(run, "unreached", journal.ApprovalApproved, "op", ""); !errors.Is(err, journal.ErrTransition) {
			t.Fatalf("DecideApproval of a step not reached: %v", err)
		}
		if err := j.SetRunStatus(run, journal.RunSucceeded, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := j.DecideInAdvance(run, "unreached", journal.ApprovalApproved, "op", ""); !errors.Is(err, journal.ErrTransition) || !strings.Contains(err.Error(), "succeeded") {
			t.Fatalf("in advance on a run that succeeded: %v", err)
		}

		// Durable: a new open reads the decisions back.
		journaltest.CheckAndClose(t, j)
		j = journaltest.OpenStore(t, path, nil)
		r, err = j.Run(run)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Approval("deploy"); got == nil || !got.InAdvance || got.Message != "Roll out?" || !got.At.Equal(*a.At) {
			t.Fatalf("after reopening: %+v", r.Approvals)
		}
	})
}

func TestDecideApprovalRefuses(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		for _, tc := range []struct {
			name, step string
			as         journal.ApprovalState
			by, want   string
		}{
			{"nothing waits", "deploy", journal.ApprovalApproved, "op", "step deploy is not waiting for approval (no step of this run waits for approval)"},
		} {
			if _, err := j.DecideApproval(run, tc.step, tc.as, tc.by, ""); !errors.Is(err, journal.ErrTransition) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
		}
		if _, err := j.RequestApproval(run, "deploy", ""); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, step string
			as         journal.ApprovalState
			by, want   string
		}{
			{"another step", "build", journal.ApprovalApproved, "op", "step build is not waiting for approval (waiting: deploy)"},
			{"not a decision", "deploy", journal.ApprovalPending, "op", "want approved or rejected"},
			{"nobody", "deploy", journal.ApprovalRejected, " ", "who (by) is required"},
		} {
			if _, err := j.DecideApproval(run, tc.step, tc.as, tc.by, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
		}
		if _, err := j.DecideApproval(journal.NewID(), "deploy", journal.ApprovalApproved, "op", ""); !errors.Is(err, journal.ErrNotFound) {
			t.Errorf("unknown run: %v", err)
		}
		r, _ := j.Run(run)
		if p := r.PendingApprovals(); len(p) != 1 || p[0].Step != "deploy" {
			t.Errorf("refused decisions wrote something: %+v", r.Approvals)
		}
	})
}

func TestCheckFindsBadApprovals(t *testing.T) {
	j := journaltest.Open(t, nil)
	run := newRun(t, j)
	r, _ := j.Run(run)
	now := time.Now().UTC()
	earlier := now.Add(-time.Hour)
	good := *r
	for _, tc := range []struct {
		name      string
		approvals []journal.Approval
		status    journal.RunStatus
		want      string
	}{
		{"twice", []journal.Approval{{Step: "a", RequestedAt: now, State: journal.ApprovalPending}, {Step: "a", RequestedAt: now, State: journal.ApprovalPending}}, journal.RunRunning, "a second approval of the same step"},
		{"no step", []journal.Approval{{RequestedAt: now, State: journal.ApprovalPending}}, journal.RunRunning, "approval 1 has no step"},
		{"pending but decided", []journal.Approval{{Step: "a", RequestedAt: now, State: journal.ApprovalPending, By: "op"}}, journal.RunRunning, `pending but decided by "op"`},
		{"decided by nobody", []journal.Approval{{Step: "a", RequestedAt: now, State: journal.ApprovalApproved, At: &now}}, journal.RunRunning, "approved without who"},
		{"decided before asked", []journal.Approval{{Step: "a", RequestedAt: now, State: journal.ApprovalRejected, By: "op", At: &earlier}}, journal.RunRunning, "rejected without who, or when not after"},
		{"succeeded while waiting", []journal.Approval{{Step: "a", RequestedAt: now, State: journal.ApprovalPending}}, journal.RunSucceeded, "succeeded while the step waits for approval"},
		{"pending, never requested", []journal.Approval{{Step: "a", State: journal.ApprovalPending}}, journal.RunRunning, "pending but never requested"},
		{"decided, never requested", []journal.Approval{{Step: "a", State: journal.ApprovalApproved, By: "op", At: &now}}, journal.RunRunning, "approved without who, or when not after"},
		{"in advance, reached first", []journal.Approval{{Step: "a", RequestedAt: earlier, State: journal.ApprovalApproved, By: "op", At: &now, InAdvance: true}}, journal.RunRunning, "approved in advance without who, or reached before"},
		{"in advance, by nobody", []journal.Approval{{Step: "a", State: journal.ApprovalRejected, At: &now, InAdvance: true}}, journal.RunRunning, "rejected in advance without who"},
	} {
		bad := good
		bad.Approvals, bad.Status = tc.approvals, tc.status
		if tc.status.Finished() {
			bad.FinishedAt = &now
		}
		if err := j.PutRunUnchecked(&bad); err != nil {
			t.Fatal(err)
		}
		probs, err := j.Check()
		if err != nil {
			t.Fatal(err)
		}
		if len(probs) != 1 || !strings.Contains(probs[0].String(), tc.want) {
			t.Errorf("%s: Check found %v, want %q", tc.name, probs, tc.want)
		}
		if err := j.PutRunUnchecked(&good); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPruneKeepsRunWaitingForApproval(t *testing.T) {
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	journaltest.Each(t, &journal.Options{Now: c.now}, func(t *testing.T, j journal.Store) {
		waiting, decided := newRun(t, j), newRun(t, j)
		for _, run := range []journal.ID{waiting, decided} {
			if _, err := j.RequestApproval(run, "deploy", ""); err != nil {
				t.Fatal(err)
			}
			if err := j.SetRunStatus(run, journal.RunBlocked, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := j.DecideApproval(decided, "deploy", journal.ApprovalRejected, "op", "not today"); err != nil {
			t.Fatal(err)
		}
		rep, err := j.Prune(c.now(), false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Runs != 1 || len(rep.Kept) != 1 || rep.Kept[0].ID != waiting || rep.Kept[0].Reason != "step deploy waits for approval" {
			t.Fatalf("prune %+v: want the decided run removed and the waiting one kept", rep)
		}
		if _, err := j.Run(decided); !errors.Is(err, journal.ErrNotFound) {
			t.Errorf("decided run: %v", err)
		}
	})
}

func TestApprovalStateNames(t *testing.T) {
	for _, s := range []journal.ApprovalState{journal.ApprovalPending, journal.ApprovalApproved, journal.ApprovalRejected} {
		got, err := journal.ParseApprovalState(s.String())
		if err != nil || got != s {
			t.Errorf("%s: parsed as %v, %v", s, got, err)
		}
	}
	if _, err := journal.ParseApprovalState("maybe"); err == nil || !strings.Contains(err.Error(), "want pending, approved or rejected") {
		t.Errorf("unknown state: %v", err)
	}
	if journal.ApprovalPending.Decided() || !journal.ApprovalRejected.Decided() {
		t.Error("Decided")
	}
}
