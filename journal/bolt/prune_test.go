package bolt_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

func TestPrune(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	journaltest.Each(t, &journal.Options{Now: c.now}, func(t *testing.T, j journal.Store) {
		mk := func(status journal.RunStatus, states ...journal.State) journal.ID {
			run := newRun(t, j)
			for _, s := range states {
				in := begin(t, j, run, "srv", "tool")
				if s != intent {
					finish(t, j, in, s)
				}
			}
			if status != journal.RunRunning {
				if err := j.SetRunStatus(run, status, nil); err != nil {
					t.Fatal(err)
				}
			}
			return run
		}
		succeeded := mk(journal.RunSucceeded, done, done)
		failedRun := mk(journal.RunFailed, done, failed)
		blocked := mk(journal.RunBlocked, done, unknown)
		resolved := mk(journal.RunBlocked, unknown)
		invs, _ := j.RunInvocations(resolved)
		if err := j.Resolve(invs[0].ID, journal.Resolution{By: "op", Why: "it ran", As: done}, nil); err != nil {
			t.Fatal(err)
		}
		running := mk(journal.RunRunning, done)
		crashed := mk(journal.RunCancelled, intent)
		interrupted := mk(journal.RunCancelled, done, journal.StateAborted)
		before := c.now()
		recent := mk(journal.RunSucceeded, done)

		wantKept := map[journal.ID]string{blocked: "outcome_unknown", running: "running", crashed: "is intent", interrupted: "is aborted"}
		check := func(rep journal.PruneReport) {
			t.Helper()
			if rep.Runs != 3 || rep.Invocations != 5 || len(rep.Kept) != len(wantKept) {
				t.Fatalf("report %+v, want 3 runs, 5 invocations, %d kept", rep, len(wantKept))
			}
			for _, k := range rep.Kept {
				if !strings.Contains(k.Reason, wantKept[k.ID]) || wantKept[k.ID] == "" {
					t.Errorf("kept %s: %q", k.ID, k.Reason)
				}
			}
		}
		var snap bytes.Buffer
		j.Export(&snap, time.Time{}, false)
		rep, err := j.Prune(before, true)
		if err != nil {
			t.Fatal(err)
		}
		check(rep)
		var after bytes.Buffer
		j.Export(&after, time.Time{}, false)
		if !bytes.Equal(snap.Bytes(), after.Bytes()) {
			t.Fatal("dry run changed invocations")
		}
		for _, id := range []journal.ID{succeeded, failedRun, resolved} {
			if _, err := j.Run(id); err != nil {
				t.Fatalf("dry run removed %s: %v", id, err)
			}
		}

		if rep, err = j.Prune(before, false); err != nil {
			t.Fatal(err)
		}
		check(rep)
		for _, id := range []journal.ID{succeeded, failedRun, resolved} {
			if _, err := j.Run(id); !errors.Is(err, journal.ErrNotFound) {
				t.Errorf("pruned run %s: %v", id, err)
			}
			if invs, _ := j.Invocations(journal.Filter{Run: id}); len(invs) != 0 {
				t.Errorf("pruned run %s still lists %d invocations", id, len(invs))
			}
		}
		for _, id := range []journal.ID{blocked, running, crashed, interrupted, recent} {
			if _, err := j.Run(id); err != nil {
				t.Errorf("kept run %s: %v", id, err)
			}
		}
		if invs, _ := j.Invocations(journal.Filter{Server: "srv", Tool: "tool"}); len(invs) != 7 {
			t.Errorf("%d invocations left, want 7", len(invs))
		}
		if rep, _ := j.Prune(before, false); rep.Runs != 0 {
			t.Errorf("second prune removed %d", rep.Runs)
		}
	})
}

func TestPruneManyRunsInBatches(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	journaltest.Each(t, &journal.Options{Now: c.now}, func(t *testing.T, j journal.Store) {
		for range 450 {
			run := newRun(t, j)
			finish(t, j, begin(t, j, run, "s", "t"), done)
			if err := j.SetRunStatus(run, journal.RunSucceeded, nil); err != nil {
				t.Fatal(err)
			}
		}
		keep := newRun(t, j)
		rep, err := j.Prune(c.now(), false)
		if err != nil || rep.Runs != 450 || rep.Invocations != 450 || len(rep.Kept) != 1 || rep.Kept[0].ID != keep {
			t.Fatalf("%+v, %v", rep, err)
		}
		if runs, _ := j.Runs(journal.RunFilter{}); len(runs) != 1 {
			t.Errorf("%d runs left", len(runs))
		}
	})
}

// contents is everything a journal holds, as its queries return it.
func contents(t *testing.T, j *bolt.Store) ([]journal.Run, []byte) {
	t.Helper()
	runs, err := j.Runs(journal.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := j.Export(&b, time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	return runs, b.Bytes()
}

func TestCompactKeepsEverything(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.db")
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	j := journaltest.OpenPath(t, path, &journal.Options{Now: c.now})
	for i := range 300 {
		run := newRun(t, j)
		for range 3 {
			finish(t, j, begin(t, j, run, "s", "t"), []journal.State{done, unknown}[i%2])
		}
		j.SetRunStatus(run, []journal.RunStatus{journal.RunSucceeded, journal.RunBlocked}[i%2], nil)
	}
	if rep, err := j.Prune(c.now(), false); err != nil || rep.Runs != 150 {
		t.Fatalf("prune: %+v %v", rep, err)
	}
	runs, invs := contents(t, j)
	journaltest.CheckAndClose(t, j)

	before, after, err := bolt.Compact(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); before <= after || st.Size() != after || st.Mode() != 0o600 {
		t.Errorf("sizes %d → %d (file %d, mode %v)", before, after, st.Size(), st.Mode())
	}
	t.Logf("compacted %d KiB → %d KiB", before>>10, after>>10)
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 2 || ents[1].Name() != "journal.db-wal" {
		t.Errorf("directory holds %v after Compact, want the journal and its log", ents)
	}
	j = journaltest.OpenPath(t, path, nil)
	runs2, invs2 := contents(t, j)
	if !reflect.DeepEqual(runs, runs2) || !bytes.Equal(invs, invs2) || len(runs) != 150 {
		t.Errorf("records differ after Compact: %d/%d runs, %d/%d export bytes", len(runs), len(runs2), len(invs), len(invs2))
	}
	// Still a working journal.
	finish(t, j, begin(t, j, runs2[0].ID, "s", "t"), done)
}

func TestCompactRefuses(t *testing.T) {
	t.Parallel()
	t.Run("locked by another process", func(t *testing.T) {
		path := smallJournal(t)
		c := startChild(t, "lock", path)
		defer func() { c.stdin.Close(); c.cmd.Wait() }()
		c.waitFor(t, "ready")
		b := readFile(t, path)
		if _, _, err := bolt.Compact(path); !errors.Is(err, journal.ErrLocked) {
			t.Errorf("Compact: %v, want ErrLocked", err)
		}
		if !bytes.Equal(b, readFile(t, path)) {
			t.Error("file modified")
		}
	})
	t.Run("open in this process", func(t *testing.T) {
		j := journaltest.Open(t, nil)
		if _, _, err := bolt.Compact(j.Path()); !errors.Is(err, journal.ErrLocked) {
			t.Errorf("Compact: %v, want ErrLocked", err)
		}
	})
	t.Run("not a journal", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x")
		os.WriteFile(path, []byte("hello"), 0o600)
		if _, _, err := bolt.Compact(path); !errors.Is(err, journal.ErrNotJournal) {
			t.Errorf("Compact: %v", err)
		}
		if string(readFile(t, path)) != "hello" {
			t.Error("file modified")
		}
	})
	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "none.db")
		if _, _, err := bolt.Compact(path); err == nil {
			t.Error("Compact of a missing file succeeded")
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Error("Compact created a file")
		}
	})
}

// TestPruneRemovesALegacyStateEntry: a journal written before the state
// index left completed invocations out may list one there; pruning its
// run removes that entry too, and Check finds nothing after.
func TestPruneRemovesALegacyStateEntry(t *testing.T) {
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	j := journaltest.Open(t, &journal.Options{Now: c.now})
	run := newRun(t, j)
	in := begin(t, j, run, "srv", "tool")
	finish(t, j, in, done)
	if err := j.SetRunStatus(run, journal.RunSucceeded, nil); err != nil {
		t.Fatal(err)
	}
	if err := j.PutStrayStateKey(done, in.ID, false); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Hour)
	if rep, err := j.Prune(c.now(), false); err != nil || rep.Runs != 1 {
		t.Fatalf("prune: %+v, %v", rep, err)
	}
	probs, err := j.Check()
	if err != nil || len(probs) != 0 {
		t.Errorf("Check after the prune: %v %v", probs, err)
	}
}
