package journal_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

var allStates = []journal.State{intent, done, failed, unknown, aborted, timedOut, skipped, retry}

// legalInv is the expected transition table, written out independently of
// state.go. State(0) is "no record yet".
var legalInv = map[journal.State][]journal.State{
	0:        {intent, skipped},
	intent:   {intent, done, failed, unknown, aborted, timedOut},
	done:     {},
	failed:   {intent, retry},
	unknown:  {done, failed, retry},
	aborted:  {intent, done, failed, retry, unknown},
	timedOut: {intent, done, failed, retry, unknown},
	skipped:  {},
	retry:    {intent},
}

func contains(set []journal.State, s journal.State) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

func TestCanTransitionMatchesTable(t *testing.T) {
	for from, tos := range legalInv {
		for _, to := range append([]journal.State{0}, allStates...) {
			if got, want := journal.CanTransition(from, to), contains(tos, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
}

// reach puts a new invocation into state from ("intent/ended": in flight,
// its attempt ended without an outcome) and returns it with its intent.
func reach(t *testing.T, j journal.Store, from journal.State, ended bool) (journal.ID, journal.Intent) {
	t.Helper()
	run := newRun(t, j)
	if from == skipped {
		inv := &journal.Invocation{RunID: run, Step: "s", Server: "srv", Tool: "t"}
		if err := j.Skip(inv); err != nil {
			t.Fatal(err)
		}
		return inv.ID, journal.Intent{}
	}
	in := begin(t, j, run, "srv", "t")
	switch from {
	case intent:
		if ended {
			finish(t, j, in, intent)
		}
	case retry:
		finish(t, j, in, unknown)
		if err := j.Resolve(in.ID, journal.Resolution{By: "op", Why: "checked", As: retry}, nil); err != nil {
			t.Fatal(err)
		}
	default:
		finish(t, j, in, from)
	}
	if got := state(t, j, in.ID); got != from {
		t.Fatalf("reach %s: got %s", from, got)
	}
	return in.ID, in
}

// transition tries every write method that can move an invocation to to,
// and returns nil at the first that succeeds, or the errors of all.
func transition(j journal.Store, id journal.ID, in journal.Intent, to journal.State) []error {
	tries := []func() error{
		func() error { return j.Finish(in, journal.Outcome{State: to, Failure: "connection_lost"}) },
		func() error { return j.Interrupted(id, journal.Outcome{State: to, Failure: "connection_lost"}) },
		func() error {
			return j.Decide(id, journal.Decision{Verdict: "outcome_unknown", Reason: "r", View: "send_time"}, to, nil)
		},
		func() error { return j.Resolve(id, journal.Resolution{By: "op", Why: "checked", As: to}, nil) },
	}
	if to == intent {
		tries = append(tries, func() error { _, err := j.Again(id, journal.NextAttempt{Kind: journal.KindReplay}); return err })
	}
	var errs []error
	for _, try := range tries {
		err := try()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errs
}

func TestInvocationTransitions(t *testing.T) {
	t.Parallel()
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		type from struct {
			s     journal.State
			ended bool
		}
		froms := []from{{intent, true}}
		for _, s := range allStates {
			froms = append(froms, from{s, false})
		}
		for _, f := range froms {
			for _, to := range allStates {
				name := fmt.Sprintf("%s→%s", f.s, to)
				if f.ended {
					name = "ended_" + name
				}
				t.Run(name, func(t *testing.T) {
					id, in := reach(t, j, f.s, f.ended)
					before := raw(t, j.Invocation, id)
					errs := transition(j, id, in, to)
					if want := contains(legalInv[f.s], to); want {
						if errs != nil {
							t.Fatalf("legal transition refused: %v", errs)
						}
						if got := state(t, j, id); got != to {
							t.Fatalf("state after = %s, want %s", got, to)
						}
						return
					}
					if errs == nil {
						t.Fatalf("illegal transition accepted; state now %s", state(t, j, id))
					}
					for _, err := range errs {
						if !errors.Is(err, journal.ErrTransition) {
							t.Errorf("error %v, want ErrTransition", err)
						}
					}
					if after := raw(t, j.Invocation, id); !bytes.Equal(before, after) {
						t.Errorf("record changed by refused writes:\n%s\n%s", before, after)
					}
				})
			}
		}
	})
}

var legalRun = map[journal.RunStatus][]journal.RunStatus{
	0:                    {journal.RunRunning},
	journal.RunRunning:   {journal.RunRunning, journal.RunSucceeded, journal.RunFailed, journal.RunBlocked, journal.RunCancelled},
	journal.RunSucceeded: {},
	journal.RunFailed:    {journal.RunRunning},
	journal.RunBlocked:   {journal.RunRunning},
	journal.RunCancelled: {journal.RunRunning},
}

func TestRunTransitions(t *testing.T) {
	t.Parallel()
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		statuses := []journal.RunStatus{journal.RunRunning, journal.RunSucceeded, journal.RunFailed, journal.RunBlocked, journal.RunCancelled}
		for from, tos := range legalRun {
			for _, to := range append([]journal.RunStatus{0}, statuses...) {
				want := false
				for _, s := range tos {
					want = want || s == to
				}
				if got := journal.CanTransitionRun(from, to); got != want {
					t.Errorf("CanTransitionRun(%s, %s) = %v, want %v", from, to, got, want)
				}
			}
		}
		for _, from := range statuses {
			for _, to := range statuses {
				t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
					id := newRun(t, j)
					if from != journal.RunRunning {
						if err := j.SetRunStatus(id, from, nil); err != nil {
							t.Fatal(err)
						}
					}
					before := raw(t, j.Run, id)
					err := j.SetRunStatus(id, to, &journal.Error{Code: "C", Message: "m"})
					if journal.CanTransitionRun(from, to) {
						r, rerr := j.Run(id)
						if err != nil || rerr != nil || r.Status != to || (r.FinishedAt != nil) != to.Finished() {
							t.Fatalf("legal: err %v, run %+v", err, r)
						}
						return
					}
					if !errors.Is(err, journal.ErrTransition) {
						t.Fatalf("illegal: err %v, want ErrTransition", err)
					}
					if after := raw(t, j.Run, id); !bytes.Equal(before, after) {
						t.Errorf("run record changed:\n%s\n%s", before, after)
					}
				})
			}
		}
	})
}

func TestRunCannotSucceedWithUnsettledInvocation(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		for _, s := range []journal.State{intent, unknown, retry} {
			run := newRun(t, j)
			id, _ := func() (journal.ID, journal.Intent) {
				in := begin(t, j, run, "srv", "t")
				switch s {
				case unknown:
					finish(t, j, in, unknown)
				case retry:
					finish(t, j, in, unknown)
					if err := j.Resolve(in.ID, journal.Resolution{By: "op", Why: "w", As: retry}, nil); err != nil {
						t.Fatal(err)
					}
				}
				return in.ID, in
			}()
			before := raw(t, j.Run, run)
			if err := j.SetRunStatus(run, journal.RunSucceeded, nil); !errors.Is(err, journal.ErrTransition) {
				t.Errorf("%s: SetRunStatus(succeeded) = %v, want ErrTransition", s, err)
			}
			if !bytes.Equal(before, raw(t, j.Run, run)) {
				t.Errorf("%s: run record changed", s)
			}
			if err := j.SetRunStatus(run, journal.RunBlocked, nil); err != nil {
				t.Errorf("%s: blocked: %v", s, err)
			}
			_ = id
		}
	})
}

func TestFinishRefusesForeignOrStaleIntent(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		in := begin(t, j, run, "srv", "t")
		forged := journal.Intent{ID: in.ID, RunID: run, IdempotencyKey: in.IdempotencyKey, Attempt: 1}
		if forged.Valid() || !in.Valid() {
			t.Fatalf("Valid: forged %v, issued %v", forged.Valid(), in.Valid())
		}
		if err := j.Finish(forged, journal.Outcome{State: done}); !errors.Is(err, journal.ErrTransition) {
			t.Errorf("forged intent: %v", err)
		}
		finish(t, j, in, intent)
		in2, err := j.Again(in.ID, journal.NextAttempt{Kind: journal.KindReplay, Decision: &journal.Decision{Verdict: "replay", Reason: "safe", View: "rediscovered"}})
		if err != nil || in2.Attempt != 2 || in2.Kind != journal.KindReplay || in2.IdempotencyKey != in.IdempotencyKey {
			t.Fatalf("again: %+v %v", in2, err)
		}
		if err := j.Finish(in, journal.Outcome{State: done}); !errors.Is(err, journal.ErrTransition) {
			t.Errorf("stale attempt 1: %v", err)
		}
		finish(t, j, in2, done)
		inv, err := j.Invocation(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(inv.Attempts) != 2 || inv.Attempts[0].N != 1 || inv.Attempts[1].N != 2 || inv.Attempts[0].Kind != journal.KindFirst ||
			inv.Attempts[1].Kind != journal.KindReplay || !inv.Attempts[1].Replay || inv.Attempts[0].Failure != "connection_lost" ||
			inv.Tally().Replays != 1 || inv.Tally().AgainstBudget != 1 || len(inv.Decisions) != 1 || inv.Decisions[0].Attempt != 1 {
			t.Errorf("record: %+v", inv)
		}
	})
}

func TestResolveRecordsWhoWhenWhy(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		in := begin(t, j, newRun(t, j), "srv", "t")
		if err := j.Finish(in, journal.Outcome{State: unknown, Error: &journal.Error{Code: "MCPFLOW_OUTCOME_UNKNOWN", Message: "may have run"}}); err != nil {
			t.Fatal(err)
		}
		if err := j.Resolve(in.ID, journal.Resolution{As: done}, nil); err == nil {
			t.Fatal("resolution without who and why accepted")
		}
		err := j.Resolve(in.ID, journal.Resolution{By: "alice", Why: "ticket exists", As: done}, &journal.Result{Content: []byte(`[]`)})
		if err != nil {
			t.Fatal(err)
		}
		inv, _ := j.Invocation(in.ID)
		r := inv.Resolutions
		if inv.State != done || len(r) != 1 || r[0].By != "alice" || r[0].Why != "ticket exists" || r[0].From != unknown || r[0].As != done || r[0].At.IsZero() || inv.Result == nil || inv.Error != nil {
			t.Errorf("record: %+v", inv)
		}
	})
}

func TestStateNames(t *testing.T) {
	for _, s := range allStates {
		got, err := journal.ParseState(s.String())
		if err != nil || got != s {
			t.Errorf("ParseState(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := journal.ParseState("done"); err == nil {
		t.Error("ParseState(done) accepted")
	}
	for _, s := range []journal.RunStatus{journal.RunRunning, journal.RunSucceeded, journal.RunFailed, journal.RunBlocked, journal.RunCancelled} {
		got, err := journal.ParseRunStatus(s.String())
		if err != nil || got != s {
			t.Errorf("ParseRunStatus(%q) = %v, %v", s, got, err)
		}
	}
}

// TestRetryApprovedAfterFailureOrToolError: an operator may approve sending
// again a failed invocation, or one that completed with a tool error — not
// one that completed with a result.
func TestRetryApprovedAfterFailureOrToolError(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		approve := func(id journal.ID) error {
			return j.Resolve(id, journal.Resolution{By: "op", Why: "retry", As: journal.StateRetryApproved}, nil)
		}
		for _, tc := range []struct {
			name string
			o    journal.Outcome
			ok   bool
		}{
			{"tool error", journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{IsError: true}}, true},
			{"result", journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{}}, false},
			{"failed", journal.Outcome{State: journal.StateFailed, Failure: "rejected", Error: &journal.Error{Code: "X", Message: "x"}}, true},
		} {
			in := begin(t, j, run, "s", "t")
			if err := j.Finish(in, tc.o); err != nil {
				t.Fatal(err)
			}
			err := approve(in.ID)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, journal.ErrTransition)) {
				t.Errorf("%s: approve = %v, want ok=%v", tc.name, err, tc.ok)
			}
			if tc.ok && state(t, j, in.ID) != journal.StateRetryApproved {
				t.Errorf("%s: state %s", tc.name, state(t, j, in.ID))
			}
		}
	})
}

// TestEndRunReturnsTheRunAsCommitted: EndRun's run is what Run reads back
// (the engine returns it instead of reading the run again), outputs shaped
// as JSON decodes them, on every backend, sealed or not, and nothing in it
// is shared with what the caller passed.
func TestEndRunReturnsTheRunAsCommitted(t *testing.T) {
	for _, key := range []*journal.Key{nil, journal.NewKey()} {
		journaltest.Each(t, &journal.Options{Key: key}, func(t *testing.T, j journal.Store) {
			run := newRun(t, j)
			if _, err := j.RequestApproval(run, "deploy", "Roll out?"); err != nil {
				t.Fatal(err)
			}
			if _, err := j.DecideApproval(run, "deploy", journal.ApprovalApproved, "alice", "ok"); err != nil {
				t.Fatal(err)
			}
			outputs := map[string]any{"n": 5, "big": int64(1<<53 + 1), "typed": map[string]int{"k": 1}, "list": []string{"a"}}
			got, err := j.EndRun(run, journal.RunSucceeded, nil, outputs)
			if err != nil {
				t.Fatal(err)
			}
			outputs["n"] = 6 // the caller's map is not the run's
			want, err := j.Run(run)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("EndRun returned\n%+v\nRun reads\n%+v", got, want)
			}

			failed := newRun(t, j)
			e := &journal.Error{Code: "X", Message: "no"}
			got, err = j.EndRun(failed, journal.RunFailed, e, map[string]any{"dropped": true})
			if err != nil {
				t.Fatal(err)
			}
			e.Message = "changed"
			if want, _ = j.Run(failed); !reflect.DeepEqual(got, want) || got.Error.Message != "no" || got.Outputs != nil {
				t.Errorf("EndRun returned\n%+v\nRun reads\n%+v", got, want)
			}

			// What JSON changes on the way: an empty map is left out, a
			// byte that is not UTF-8 becomes U+FFFD.
			empty := newRun(t, j)
			if got, err = j.EndRun(empty, journal.RunSucceeded, nil, map[string]any{}); err != nil {
				t.Fatal(err)
			}
			if want, _ = j.Run(empty); !reflect.DeepEqual(got, want) {
				t.Errorf("empty outputs: EndRun returned\n%+v\nRun reads\n%+v", got, want)
			}
			bad := newRun(t, j)
			if got, err = j.EndRun(bad, journal.RunFailed, &journal.Error{Code: "X", Message: "bad \xff byte"}, nil); err != nil {
				t.Fatal(err)
			}
			if want, _ = j.Run(bad); !reflect.DeepEqual(got, want) {
				t.Errorf("invalid UTF-8: EndRun returned\n%+v\nRun reads\n%+v", got, want)
			}
		})
	}
}

// TestInterruptedMarksTheAttempt: an attempt found open on resume is marked
// Interrupted (its end is when it was found); one finished is not.
func TestInterruptedMarksTheAttempt(t *testing.T) {
	t.Parallel()
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		in := begin(t, j, run, "srv", "t")
		if err := j.Interrupted(in.ID, journal.Outcome{State: intent, Failure: "connection_lost"}); err != nil {
			t.Fatal(err)
		}
		again, err := j.Again(in.ID, journal.NextAttempt{Kind: journal.KindReplay})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Finish(again, journal.Outcome{State: done, Result: &journal.Result{}}); err != nil {
			t.Fatal(err)
		}
		inv, err := j.Invocation(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(inv.Attempts) != 2 || !inv.Attempts[0].Interrupted || inv.Attempts[0].EndedAt == nil || inv.Attempts[1].Interrupted {
			t.Errorf("attempts %+v: want the first interrupted (with an end), the second not", inv.Attempts)
		}
	})
}
