package journal_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

func TestGroupCommitConcurrentWriters(t *testing.T) {
	t.Parallel()
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		const writers, each = 64, 10
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[journal.ID]bool{}
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range each {
					in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Server: "srv", Tool: "t"})
					if err == nil {
						err = j.Finish(in, journal.Outcome{State: journal.StateCompleted})
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					got[in.ID] = true
					mu.Unlock()
				}
			}()
		}
		c0 := j.Stats().Commits
		close(start)
		wg.Wait()
		writes, commits := int64(2*writers*each), j.Stats().Commits-c0
		if commits >= writes {
			t.Errorf("%d commits for %d writes: writers did not share commits", commits, writes)
		}
		t.Logf("%d writes in %d commits", writes, commits)
		invs, err := j.Invocations(journal.Filter{Run: run, State: journal.StateCompleted})
		if err != nil || len(invs) != writers*each {
			t.Fatalf("%d completed invocations, %v", len(invs), err)
		}
		for _, inv := range invs {
			if !got[inv.ID] {
				t.Errorf("unexpected invocation %s", inv.ID)
			}
		}
	})
}

func TestGroupCommitFailuresDoNotSpill(t *testing.T) {
	t.Parallel()
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		finished := newRun(t, j)
		if err := j.SetRunStatus(finished, journal.RunSucceeded, nil); err != nil {
			t.Fatal(err)
		}
		const n = 64
		errs := make([]error, n)
		ids := make([]journal.ID, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				switch i % 4 {
				case 0: // illegal: a succeeded run cannot succeed again
					errs[i] = j.SetRunStatus(finished, journal.RunSucceeded, nil)
				case 1: // missing run
					_, errs[i] = j.Begin(&journal.Invocation{RunID: journal.NewID()})
				default:
					var in journal.Intent
					in, errs[i] = j.Begin(&journal.Invocation{RunID: run, Server: "s", Tool: "t"})
					ids[i] = in.ID
				}
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			switch i % 4 {
			case 0:
				if !errors.Is(err, journal.ErrTransition) {
					t.Errorf("write %d: %v, want ErrTransition", i, err)
				}
			case 1:
				if !errors.Is(err, journal.ErrNotFound) {
					t.Errorf("write %d: %v, want ErrNotFound", i, err)
				}
			default:
				if err != nil {
					t.Errorf("write %d: %v", i, err)
				} else if _, err := j.Invocation(ids[i]); err != nil {
					t.Errorf("write %d acknowledged but missing: %v", i, err)
				}
			}
		}
		if invs, _ := j.RunInvocations(run); len(invs) != n/2 {
			t.Errorf("%d invocations, want %d", len(invs), n/2)
		}
	})
}

// TestLoneWriterDoesNotWait: sequential writes are not held back to be
// batched: each one is committed by itself. (How long a commit takes
// depends on the disk and its load, so the test does not time it.)
func TestLoneWriterDoesNotWait(t *testing.T) {
	t.Parallel()
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		const n = 50
		c0, start := j.Stats().Commits, time.Now()
		for range n {
			finish(t, j, begin(t, j, run, "s", "t"), journal.StateCompleted)
		}
		took := time.Since(start)
		if c := j.Stats().Commits - c0; c != 2*n {
			t.Errorf("%d commits for %d sequential writes: each write must commit at once", c, 2*n)
		}
		t.Logf("%d sequential durable writes: %v each", 2*n, took/(2*n))
	})
}

// TestPendingRidesWithTheNextCommit: a deferred write makes no commit of
// its own; the next write carries it in the same commit, before itself;
// Wait commits it when nothing else does; a failed deferred write fails
// alone; Close commits what is still queued.
func TestPendingRidesWithTheNextCommit(t *testing.T) {
	journaltest.EachLocation(t, func(t *testing.T, path string) {
		j := journaltest.OpenStore(t, path, nil)
		c0 := j.Stats().Commits

		// Run creation rides with the first intent: one commit for both.
		r := &journal.Run{Workflow: "wf"}
		created, err := j.CreateRunLater(r)
		if err != nil || created.Done() || j.Stats().Commits != c0 {
			t.Fatalf("CreateRunLater: %v, done %v, %d commits; want queued, no commit", err, created.Done(), j.Stats().Commits-c0)
		}
		in, err := j.Begin(&journal.Invocation{RunID: r.ID, Step: "a", Item: -1, Server: "s", Tool: "t"})
		if err != nil || !created.Done() || created.Wait() != nil || j.Stats().Commits-c0 != 1 {
			t.Fatalf("Begin after CreateRunLater: %v, done %v, %d commits; want one commit carrying both", err, created.Done(), j.Stats().Commits-c0)
		}

		// The outcome of a and the intent of b share a commit.
		finished, err := j.FinishLater(in, journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{Content: []byte(`[]`)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Begin(&journal.Invocation{RunID: r.ID, Step: "b", Item: -1, Server: "s", Tool: "t"}); err != nil || finished.Wait() != nil || j.Stats().Commits-c0 != 2 {
			t.Fatalf("Begin after FinishLater: %v, %v, %d commits", err, finished.Wait(), j.Stats().Commits-c0)
		}
		if got, _ := j.Invocation(in.ID); got.State != journal.StateCompleted {
			t.Errorf("a is %s, want completed", got.State)
		}

		// A deferred write that fails fails alone, at Wait; the write it rode
		// with commits.
		again, err := j.FinishLater(in, journal.Outcome{State: journal.StateCompleted})
		if err != nil {
			t.Fatal(err)
		}
		skipped, _ := j.SkipLater(&journal.Invocation{RunID: r.ID, Step: "c", Item: -1, Server: "s", Tool: "t"})
		if err := again.Wait(); !errors.Is(err, journal.ErrTransition) {
			t.Errorf("finishing a finished call: %v, want ErrTransition", err)
		}
		if err := skipped.Wait(); err != nil {
			t.Errorf("the skip queued with it: %v", err)
		}

		// Close commits what is queued.
		late, _ := j.SkipLater(&journal.Invocation{RunID: r.ID, Step: "d", Item: -1, Server: "s", Tool: "t"})
		journaltest.CheckAndClose(t, j)
		if !late.Done() || late.Wait() != nil {
			t.Fatalf("after Close: done %v, %v", late.Done(), late.Wait())
		}
		j = journaltest.OpenStore(t, path, nil)
		invs, _ := j.RunInvocations(r.ID)
		if len(invs) != 4 || invs[3].Step != "d" || invs[3].State != journal.StateSkipped {
			t.Errorf("after reopening: %d invocations, want a, b, c and d skipped", len(invs))
		}
	})
}
