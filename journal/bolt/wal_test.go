package bolt_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// crashed writes a run with a completed and an in-flight call, keeping the
// log's entries out of the file, and leaves the journal as a kill would.
// It returns the run and the two invocations.
func crashed(t *testing.T, path string, o *journal.Options) (run, done, inflight journal.ID) {
	t.Helper()
	j, err := bolt.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	j.HoldApplier()
	run = newRun(t, j)
	in := begin(t, j, run, "fs", "read")
	finish(t, j, in, journal.StateCompleted)
	fly := begin(t, j, run, "fs", "write")
	if n := j.Crash(); n == 0 {
		t.Fatal("the applier applied everything before the crash: nothing to recover")
	}
	return run, in.ID, fly.ID
}

// wantRecovered checks that the journal at path holds what crashed wrote.
func wantRecovered(t *testing.T, j *bolt.Store, run, done, inflight journal.ID) {
	t.Helper()
	invs, err := j.RunInvocations(run)
	if err != nil {
		t.Fatal(err)
	}
	if len(invs) != 2 || invs[0].ID != done || invs[0].State != journal.StateCompleted || invs[0].Result == nil ||
		invs[1].ID != inflight || invs[1].State != journal.StateIntent {
		t.Fatalf("after the crash the run holds %+v, want %s completed and %s in flight", invs, done, inflight)
	}
	if got, err := j.Invocations(journal.Filter{State: journal.StateIntent}); err != nil || len(got) != 1 || got[0].ID != inflight {
		t.Errorf("in-flight calls (the state index): %v %v", got, err)
	}
}

// A write is durable once it is in the log: a crash before the applier
// committed it to the file loses nothing, whichever open comes next.
func TestLogRecoversWhatTheFileLacks(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "read-write", true: "read-only"}[readOnly], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			run, done, fly := crashed(t, path, nil)
			j := journaltest.OpenPath(t, path, &journal.Options{ReadOnly: readOnly})
			wantRecovered(t, j, run, done, fly)
			journaltest.CheckAndClose(t, j)
			// Applied once: the next open finds nothing to apply and
			// writes nothing.
			before := readFile(t, path)
			j = journaltest.OpenPath(t, path, &journal.Options{ReadOnly: true})
			wantRecovered(t, j, run, done, fly)
			journaltest.CheckAndClose(t, j)
			if !bytes.Equal(before, readFile(t, path)) {
				t.Error("a second open wrote to the file")
			}
		})
	}
}

// The log holds records as the file stores them: an encrypted journal's
// log is applied by an open without the key, and read with it.
func TestLogOfAnEncryptedJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	key := journal.NewKey()
	run, done, fly := crashed(t, path, &journal.Options{Key: key})
	if b, err := os.ReadFile(path + "-wal"); err != nil || bytes.Contains(b, []byte(`"a":1`)) {
		t.Fatalf("the log holds the arguments in clear (%v)", err)
	}
	j := journaltest.OpenPath(t, path, &journal.Options{ReadOnly: true}) // no key
	inv, err := j.Invocation(done)
	if err != nil || inv.Sealed == "" || inv.Arguments != nil {
		t.Fatalf("without the key: %+v %v", inv, err)
	}
	journaltest.CheckAndClose(t, j)
	j = journaltest.OpenPath(t, path, &journal.Options{Key: key})
	wantRecovered(t, j, run, done, fly)
	if inv, _ := j.Invocation(done); string(inv.Arguments) != `{"a":1}` {
		t.Errorf("arguments with the key: %s", inv.Arguments)
	}
	journaltest.CheckAndClose(t, j)
}

// A crash in the middle of an append leaves a partial last entry: it was
// never acknowledged, and the entries before it are applied.
func TestLogWithATornLastEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	run, done, _ := crashed(t, path, nil)
	offs, err := bolt.LogEntries(path)
	if err != nil || len(offs) < 2 {
		t.Fatalf("log entries %v %v", offs, err)
	}
	for _, off := range offs {
		if off%4096 != 0 {
			t.Fatalf("an entry at %d: entries start on blocks of their own, so that a torn append cannot reach the one before", off)
		}
	}
	log := readFile(t, path+"-wal")
	last := offs[len(offs)-1]
	clear(log[last+30:]) // the last entry (the in-flight call's intent) cut short
	if err := os.WriteFile(path+"-wal", log, 0o600); err != nil {
		t.Fatal(err)
	}
	j := journaltest.OpenPath(t, path, nil)
	invs, err := j.RunInvocations(run)
	if err != nil || len(invs) != 1 || invs[0].ID != done || invs[0].State != journal.StateCompleted {
		t.Fatalf("run holds %+v (%v), want only the completed call", invs, err)
	}
	// Appends go on after what was applied.
	begin(t, j, run, "fs", "again")
	journaltest.CheckAndClose(t, j)
}

// An entry that was written whole and later damaged (its successor is
// intact), or a log that lacks entries the file has not applied, is
// refused, and neither file is touched.
func TestLogDamageIsRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(log []byte, offs []int64) []byte
	}{
		{"a byte flipped in an entry", func(log []byte, offs []int64) []byte {
			log[offs[0]+40] ^= 0xff
			return log
		}},
		{"a byte flipped in an entry's header", func(log []byte, offs []int64) []byte {
			log[offs[1]+1] ^= 0xff // its magic
			return log
		}},
		{"an entry's length changed", func(log []byte, offs []int64) []byte {
			log[offs[1]+5] ^= 0x40
			return log
		}},
		{"the first entry missing", func(log []byte, offs []int64) []byte {
			return append([]byte(nil), log[offs[1]:]...)
		}},
		{"an entry missing between intact ones", func(log []byte, offs []int64) []byte {
			return append(log[:offs[1]:offs[1]], log[offs[2]:]...)
		}},
		{"an older entry where the next belongs", func(log []byte, offs []int64) []byte {
			return append(append(log[:offs[1]:offs[1]], log[:offs[1]]...), log[offs[2]:]...)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			crashed(t, path, nil)
			offs, err := bolt.LogEntries(path)
			if err != nil || len(offs) < 3 {
				t.Fatalf("log entries %v %v", offs, err)
			}
			log := c.damage(readFile(t, path+"-wal"), offs)
			if err := os.WriteFile(path+"-wal", log, 0o600); err != nil {
				t.Fatal(err)
			}
			file := readFile(t, path)
			for _, ro := range []bool{true, false} {
				_, err := bolt.Open(path, &journal.Options{ReadOnly: ro})
				if !errors.Is(err, journal.ErrDamaged) || !strings.Contains(err.Error(), "log") {
					t.Errorf("read-only %v: open: %v, want damage in the log", ro, err)
				}
			}
			if !bytes.Equal(file, readFile(t, path)) || !bytes.Equal(log, readFile(t, path+"-wal")) {
				t.Error("a refused open modified the journal or its log")
			}
		})
	}
}

// The log is reused from its start once it is full and applied; a crash
// after a reuse recovers from the new entries and ignores what is left of
// the old ones.
func TestLogReusedFromItsStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j := journaltest.OpenPath(t, path, nil)
	run := newRun(t, j)
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 16<<10) + `"}`)
	var ids []journal.ID
	for range 300 { // 4.8 MiB of arguments: more than the log holds (4 MiB)
		in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: "fs", Tool: "w", Arguments: big})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	j.HoldApplier()
	last := begin(t, j, run, "fs", "last")
	ids = append(ids, last.ID)
	if n := j.Crash(); n == 0 {
		t.Fatal("nothing left to recover")
	}
	if st, err := os.Stat(path + "-wal"); err != nil || st.Size() > 5<<20 {
		t.Fatalf("log: %v, %v bytes: it was not reused", err, st.Size())
	}
	j = journaltest.OpenPath(t, path, nil)
	invs, err := j.RunInvocations(run)
	if err != nil || len(invs) != len(ids) {
		t.Fatalf("%d invocations (%v), want %d", len(invs), err, len(ids))
	}
	for i, inv := range invs {
		if inv.ID != ids[i] {
			t.Fatalf("invocation %d is %s, want %s", i, inv.ID, ids[i])
		}
	}
	journaltest.CheckAndClose(t, j)
}

// The log is as private as the journal, and a link planted in its place
// is refused rather than followed.
func TestLogIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	journaltest.CheckAndClose(t, journaltest.OpenPath(t, path, nil))
	if st, err := os.Stat(path + "-wal"); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("log: %v %v, want mode 0600", st.Mode(), err)
	}
	other := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(other, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + "-wal")
	if err := os.Symlink(other, path+"-wal"); err != nil {
		t.Fatal(err)
	}
	if _, err := bolt.Open(path, nil); !errors.Is(err, journal.ErrInaccessible) {
		t.Errorf("open with the log a link: %v, want ErrInaccessible", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
}

// A run's unsettled call is found among records already in the file (not
// only among those still in the overlay), by the state index.
func TestUnsettledFoundInTheFile(t *testing.T) {
	for _, s := range []journal.State{journal.StateIntent, journal.StateOutcomeUnknown, journal.StateRetryApproved,
		journal.StateFailed, journal.StateAborted, journal.StateTimedOut, journal.StateSkipped} {
		path := filepath.Join(t.TempDir(), "journal.db")
		j := journaltest.OpenPath(t, path, nil)
		run := newRun(t, j)
		finish(t, j, begin(t, j, run, "fs", "a"), journal.StateCompleted)
		switch s {
		case journal.StateIntent:
			begin(t, j, run, "fs", "b")
		case journal.StateSkipped:
			if err := j.Skip(&journal.Invocation{RunID: run, Step: "b", Item: -1, Server: "fs", Tool: "b"}); err != nil {
				t.Fatal(err)
			}
		case journal.StateRetryApproved:
			in := begin(t, j, run, "fs", "b")
			finish(t, j, in, journal.StateOutcomeUnknown)
			if err := j.Resolve(in.ID, journal.Resolution{By: "op", Why: "w", As: s}, nil); err != nil {
				t.Fatal(err)
			}
		default:
			finish(t, j, begin(t, j, run, "fs", "b"), s)
		}
		finish(t, j, begin(t, j, run, "fs", "c"), journal.StateCompleted)
		journaltest.CheckAndClose(t, j)
		j = journaltest.OpenPath(t, path, nil)
		err := j.SetRunStatus(run, journal.RunSucceeded, nil)
		if s.Unsettled() && !errors.Is(err, journal.ErrTransition) {
			t.Errorf("%s: a run with an unsettled call succeeded: %v", s, err)
		}
		if !s.Unsettled() && err != nil {
			t.Errorf("%s: a run whose calls are settled did not succeed: %v", s, err)
		}
		journaltest.CheckAndClose(t, j)
	}
}

// Close waits for a commit in progress: the write it races with either
// commits (and is there after a reopen) or gets ErrClosed, and nothing
// hangs after it.
func TestCloseDuringACommit(t *testing.T) {
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 4<<20) + `"}`)
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "journal.db")
		j, err := bolt.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		run := newRun(t, j)
		done := make(chan error, 1)
		var id journal.ID
		go func() {
			in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: "fs", Tool: "w", Arguments: big})
			id = in.ID
			done <- err
		}()
		if round%2 == 1 {
			time.Sleep(time.Duration(round) * 100 * time.Microsecond)
		}
		if err := j.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		werr := <-done
		if werr != nil && !errors.Is(werr, journal.ErrClosed) {
			t.Fatalf("round %d: the write racing Close: %v, want nil or ErrClosed", round, werr)
		}
		if _, err := j.Runs(journal.RunFilter{}); !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("round %d: a query after Close: %v", round, err)
		}
		j = journaltest.OpenPath(t, path, nil)
		if _, err := j.Invocation(id); (werr == nil) != (err == nil) {
			t.Errorf("round %d: write returned %v, invocation after reopen: %v", round, werr, err)
		}
		journaltest.CheckAndClose(t, j)
	}
}

// A log that is not the journal's own — another journal's, or a file that
// is not a log — is refused, never applied or overwritten; so is a
// journal's creation beside a log whose journal is gone.
func TestForeignLogRefused(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	crashed(t, a, nil)
	journaltest.CheckAndClose(t, journaltest.OpenPath(t, b, nil))
	for name, log := range map[string][]byte{
		"another journal's log": readFile(t, a+"-wal"),
		"not a log":             []byte("some other file\n"),
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(b+"-wal", log, 0o600); err != nil {
				t.Fatal(err)
			}
			file := readFile(t, b)
			for _, ro := range []bool{false, true} {
				if _, err := bolt.Open(b, &journal.Options{ReadOnly: ro}); !errors.Is(err, journal.ErrForeignLog) || !strings.Contains(err.Error(), "-wal") {
					t.Errorf("read-only %v: %v, want the log refused", ro, err)
				}
			}
			if !bytes.Equal(file, readFile(t, b)) || !bytes.Equal(log, readFile(t, b+"-wal")) {
				t.Error("a refused open wrote")
			}
		})
	}
	// The journal removed, its log left: no new journal is made over it.
	os.Remove(a)
	if _, err := bolt.Open(a, nil); !errors.Is(err, journal.ErrInaccessible) || !strings.Contains(err.Error(), "without it") {
		t.Errorf("create beside an orphaned log: %v", err)
	}
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Error("a journal was created beside its predecessor's log")
	}
}

// One journal file opened by two names (a link) has one log.
func TestLogOfALinkedJournal(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "journal.db"), filepath.Join(dir, "link.db")
	journaltest.CheckAndClose(t, journaltest.OpenPath(t, real, nil))
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	run, done, fly := crashed(t, link, nil)
	if _, err := os.Stat(link + "-wal"); !os.IsNotExist(err) {
		t.Fatalf("a second log beside the link: %v", err)
	}
	j := journaltest.OpenPath(t, real, nil)
	wantRecovered(t, j, run, done, fly)
	journaltest.CheckAndClose(t, j)
}

// Salvage copies the writes a crash left in the log, not only the file's.
func TestSalvageTakesTheLog(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "journal.db"), filepath.Join(dir, "saved.db")
	run, done, fly := crashed(t, src, nil)
	rep, err := bolt.Salvage(src, dst, nil)
	if err != nil || len(rep.Lost) > 0 || rep.Runs != 1 || rep.Invocations != 2 || rep.FromLog != 3 {
		t.Fatalf("salvage: %+v, %v; want 1 run and 2 invocations, all 3 from the log", rep, err)
	}
	j := journaltest.OpenPath(t, dst, nil)
	wantRecovered(t, j, run, done, fly)
	journaltest.CheckAndClose(t, j)
}

// While the file cannot take the log's writes (a full disk, say), writes
// go on into the log, reads that need the file get the error, and all is
// applied once the file takes writes again.
func TestApplierFailsThenRecovers(t *testing.T) {
	j := journaltest.Open(t, nil)
	run := newRun(t, j)
	full := errors.New("no space left on device")
	j.FailApplies(full)
	in := begin(t, j, run, "fs", "read") // durable in the log
	finish(t, j, in, journal.StateCompleted)
	if _, err := j.Invocations(journal.Filter{}); !errors.Is(err, full) {
		t.Fatalf("a query while the file fails: %v, want its error", err)
	}
	if st := state(t, j, in.ID); st != journal.StateCompleted { // read by id: from the log
		t.Fatalf("by id: %s", st)
	}
	if invs, err := j.RunInvocations(run); err != nil || len(invs) != 1 || invs[0].State != journal.StateCompleted { // from the log too
		t.Fatalf("a run's invocations while the file fails: %+v %v", invs, err)
	}
	if st := j.Stats(); !st.Log || !errors.Is(st.ApplyErr, full) || st.Unapplied == 0 {
		t.Fatalf("stats while the file fails: %+v, want its error and the log's entries unapplied", st)
	}
	j.FailApplies(nil)
	invs, err := j.Invocations(journal.Filter{})
	if err != nil || len(invs) != 1 || invs[0].State != journal.StateCompleted {
		t.Fatalf("after the file recovered: %+v %v", invs, err)
	}
	if st := j.Stats(); st.ApplyErr != nil || st.Unapplied != 0 || st.Applies == 0 {
		t.Fatalf("stats after the file recovered: %+v, want no error, nothing unapplied", st)
	}
	journaltest.CheckAndClose(t, j)
}

// Stats tells how long the log's appends spent in fdatasync: more after
// each commit, and never more than the time the commits took.
func TestStatsTimeTheLogsFlushes(t *testing.T) {
	j := journaltest.Open(t, nil)
	if st := j.Stats(); st.LogSync != 0 {
		t.Fatalf("flush time %v before any commit", st.LogSync)
	}
	start := time.Now()
	run := newRun(t, j)
	after := j.Stats().LogSync
	if after <= 0 || after > time.Since(start) {
		t.Fatalf("flush time %v after one commit of %v", after, time.Since(start))
	}
	for range 5 {
		in := begin(t, j, run, "fs", "read")
		finish(t, j, in, journal.StateCompleted)
	}
	st := j.Stats()
	if st.LogSync <= after || st.LogSync > time.Since(start) {
		t.Fatalf("flush time %v after %d commits of %v (%v after the first)", st.LogSync, st.Commits, time.Since(start), after)
	}
	journaltest.CheckAndClose(t, j)
}

// What a caller passed in is copied: changing it after the write changes
// nothing the journal holds, in a later write of the same record either.
func TestWritesOwnWhatTheyAreGiven(t *testing.T) {
	j := journaltest.Open(t, nil)
	run := newRun(t, j)
	args := json.RawMessage(`{"a":1}`)
	in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: "fs", Tool: "t", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	args[5] = '9'
	res := &journal.Result{Content: json.RawMessage(`[1]`)}
	if err := j.Finish(in, journal.Outcome{State: journal.StateCompleted, Result: res}); err != nil {
		t.Fatal(err)
	}
	res.Content[1] = '7'
	if err := j.Resolve(in.ID, journal.Resolution{By: "op", Why: "w", As: journal.StateCompleted}, nil); err != nil && !errors.Is(err, journal.ErrTransition) {
		t.Fatal(err)
	}
	inv, err := j.Invocation(in.ID)
	if err != nil || string(inv.Arguments) != `{"a":1}` || string(inv.Result.Content) != `[1]` {
		t.Fatalf("after the caller changed its values: arguments %s, result %s (%v)", inv.Arguments, inv.Result.Content, err)
	}
	journaltest.CheckAndClose(t, j)
}

// A record the file could not take (a key longer than bbolt's limit) is
// refused by its write, not acknowledged and then stuck in the log.
func TestWriteTheFileCannotTakeIsRefused(t *testing.T) {
	j := journaltest.Open(t, nil)
	run := newRun(t, j)
	_, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: "fs", Tool: strings.Repeat("t", 40000)})
	if err == nil {
		t.Fatal("an invocation whose index key bbolt cannot store was accepted")
	}
	begin(t, j, run, "fs", "read") // the journal goes on
	if invs, err := j.RunInvocations(run); err != nil || len(invs) != 1 {
		t.Fatalf("%d invocations, %v", len(invs), err)
	}
	journaltest.CheckAndClose(t, j)
}

// Damage in an entry the file holds already costs nothing: reading goes on
// from the next intact entry (the one after it is in the file too).
func TestDamageInAnAppliedEntryIsTolerated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j := journaltest.OpenPath(t, path, nil)
	run := newRun(t, j)
	finish(t, j, begin(t, j, run, "fs", "a"), journal.StateCompleted)
	if _, err := j.Invocations(journal.Filter{}); err != nil { // the file catches up
		t.Fatal(err)
	}
	j.HoldApplier()
	later := begin(t, j, run, "fs", "b")
	if n := j.Crash(); n == 0 {
		t.Fatal("nothing left to recover")
	}
	offs, err := bolt.LogEntries(path)
	if err != nil || len(offs) < 4 {
		t.Fatalf("log entries %v %v", offs, err)
	}
	log := readFile(t, path+"-wal")
	log[offs[1]+40] ^= 0xff // an applied entry
	if err := os.WriteFile(path+"-wal", log, 0o600); err != nil {
		t.Fatal(err)
	}
	j = journaltest.OpenPath(t, path, nil)
	if st := state(t, j, later.ID); st != journal.StateIntent {
		t.Fatalf("the unapplied intent after the damaged entry: %s", st)
	}
	journaltest.CheckAndClose(t, j)
}

// A short file that is not a log is not taken for an empty one.
func TestTinyForeignFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	journaltest.CheckAndClose(t, journaltest.OpenPath(t, path, nil))
	if err := os.WriteFile(path+"-wal", []byte("hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := bolt.Open(path, nil); !errors.Is(err, journal.ErrForeignLog) {
		t.Errorf("open: %v, want the log refused", err)
	}
	if b := readFile(t, path+"-wal"); string(b) != "hi\n" {
		t.Errorf("the file was overwritten: %q", b)
	}
}

// Salvage takes every intact entry of the log after a damaged one, and
// names the one it could not read.
func TestSalvagePastDamageInTheLog(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "journal.db"), filepath.Join(dir, "saved.db")
	run, _, fly := crashed(t, src, nil)
	offs, err := bolt.LogEntries(src)
	if err != nil || len(offs) < 4 {
		t.Fatalf("log entries %v %v", offs, err)
	}
	log := readFile(t, src+"-wal")
	log[offs[2]+40] ^= 0xff // the completed call's outcome
	if err := os.WriteFile(src+"-wal", log, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := bolt.Salvage(src, dst, nil)
	if err != nil || len(rep.Lost) != 1 || rep.Lost[0].Kind != "log entry" || rep.Lost[0].Key != "3" {
		t.Fatalf("salvage: %+v, %v; want entry 3 lost", rep, err)
	}
	j := journaltest.OpenPath(t, dst, nil)
	if st := state(t, j, fly); st != journal.StateIntent { // entry 4, after the damage
		t.Fatalf("the in-flight call after the damaged entry: %s", st)
	}
	if invs, _ := j.RunInvocations(run); len(invs) != 2 {
		t.Errorf("%d invocations, want 2", len(invs))
	}
	journaltest.CheckAndClose(t, j)
}

// A journal file with two names (a hard link) is refused: its log is found
// by name, and each name would have its own.
func TestHardLinkedJournalRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	journaltest.CheckAndClose(t, journaltest.OpenPath(t, path, nil))
	if err := os.Link(path, filepath.Join(dir, "other.db")); err != nil {
		t.Skip("no hard links here:", err)
	}
	if _, err := bolt.Open(path, nil); !errors.Is(err, journal.ErrInaccessible) || !strings.Contains(err.Error(), "hard link") {
		t.Errorf("open: %v, want refused", err)
	}
}

// A journal whose creation was killed after it linked the new file into
// place has a second name, the creation's temporary one: it opens (read-
// only too), that name is removed, and nothing of the journal is lost.
func TestJournalLinkedByAnInterruptedCreationOpens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	j := journaltest.OpenPath(t, path, nil)
	run := newRun(t, j)
	journaltest.CheckAndClose(t, j)
	if runtime.GOOS != "linux" {
		t.Skip("the number of a file's names is known on Linux only")
	}
	link := filepath.Join(t.TempDir(), "link.db") // the creation named its file after the target
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, ".journal.db.2209337.tmp")
	for _, open := range []struct {
		path     string
		readOnly bool
	}{{path, true}, {path, false}, {link, false}} {
		if err := os.Link(path, leftover); err != nil {
			t.Skip("no hard links here:", err)
		}
		j, err := bolt.Open(open.path, &journal.Options{ReadOnly: open.readOnly})
		if err != nil {
			t.Fatalf("open %+v: %v", open, err)
		}
		if _, err := os.Lstat(leftover); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("open %+v: the creation's name is still there: %v", open, err)
		}
		if r, err := j.Run(run); err != nil || r.ID != run {
			t.Errorf("open %+v: run %v, %v", open, r, err)
		}
		j.Close()
	}
}

// TestRecordsFillTheirPages: ids grow with time, so the file's records
// are appended at the right edge of their trees, and a page split there
// is left full — bbolt's default split, meant for keys that arrive at
// random, leaves every page of an append-only tree half empty (twice the
// pages to store, to read and to write).
func TestRecordsFillTheirPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"path":"/tmp/x"}`)
	for range 20 {
		run := newRun(t, j)
		for range 50 {
			in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: "fs", Tool: "write", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			finish(t, j, in, journal.StateCompleted)
		}
		if _, err := j.EndRun(run, journal.RunSucceeded, nil, nil); err != nil {
			t.Fatal(err)
		}
		j.Invocations(journal.Filter{Limit: 1}) // the log applied: one commit into the file per run
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bbolt.Tx) error {
		s := tx.Bucket([]byte("invocations")).Stats()
		if fill := float64(s.LeafInuse) / float64(s.LeafAlloc); fill < 0.8 {
			t.Errorf("%d invocations in %d leaf pages, %.0f%% of them in use", s.KeyN, s.LeafPageN, 100*fill)
		}
		return nil
	})
}

// A run's invocations are read from the log and the file together,
// without waiting for the log to be applied: one in the file, one whose
// outcome only the log holds, one only the log holds.
func TestRunInvocationsDoNotWaitForTheFile(t *testing.T) {
	j := journaltest.Open(t, &journal.Options{ApplyIdle: time.Hour})
	run := newRun(t, j)
	a, b := begin(t, j, run, "fs", "read"), begin(t, j, run, "fs", "read")
	finish(t, j, b, done)
	if _, err := j.Invocations(journal.Filter{Limit: 1}); err != nil { // applies the log
		t.Fatal(err)
	}
	finish(t, j, a, failed)
	c := begin(t, j, run, "fs", "read")
	before := j.Stats()
	invs, err := j.RunInvocations(run)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, inv := range invs {
		got = append(got, inv.ID.Short()+" "+inv.State.String())
	}
	want := []string{a.ID.Short() + " failed", b.ID.Short() + " completed", c.ID.Short() + " intent"}
	if !slices.Equal(got, want) {
		t.Errorf("RunInvocations: %q; want %q", got, want)
	}
	if after := j.Stats(); after.Applies != before.Applies || after.Unapplied == 0 {
		t.Errorf("applies %d then %d, unapplied %d: the read waited for the log to be applied", before.Applies, after.Applies, after.Unapplied)
	}
	journaltest.CheckAndClose(t, j)
}

// While the applier moves the log into the file, a run's invocations
// read at any moment hold every invocation begun before the read, each
// at least as far as it was before the read.
func TestRunInvocationsWhileTheLogIsApplied(t *testing.T) {
	j := journaltest.Open(t, &journal.Options{ApplyIdle: time.Millisecond})
	run := newRun(t, j)
	var mu sync.Mutex
	states := map[journal.ID]journal.State{} // as of the last write that returned
	stop := make(chan struct{})
	var reads int
	var wg sync.WaitGroup
	readsDone := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer readsDone() // a write that fails the test ends the reads too
	// The reads; the writes go in the test's goroutine.
	wg.Go(func() {
		for ; ; reads++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			known := maps.Clone(states)
			mu.Unlock()
			invs, err := j.RunInvocations(run)
			if err != nil {
				t.Error(err)
				return
			}
			got := map[journal.ID]journal.State{}
			for i, inv := range invs {
				if i > 0 && bytes.Compare(invs[i-1].ID[:], inv.ID[:]) >= 0 {
					t.Errorf("not in creation order at %d", i)
					return
				}
				got[inv.ID] = inv.State
			}
			for id, st := range known {
				if g, ok := got[id]; !ok || st == done && g != done {
					t.Errorf("invocation %s was %s before the read; the read has %v (%v)", id.Short(), st, g, ok)
					return
				}
			}
		}
	})
	for i := range 100 {
		applies := j.Stats().Applies // before this write: its apply comes after
		in := begin(t, j, run, "fs", "read")
		mu.Lock()
		states[in.ID] = intent
		mu.Unlock()
		finish(t, j, in, done)
		mu.Lock()
		states[in.ID] = done
		mu.Unlock()
		if i%10 == 9 {
			// The writes pause until the log, quiet, is applied (a disk
			// that flushes fast left it never quiet for 1 ms): the
			// applies happen while the reads go on.
			for deadline := time.Now().Add(10 * time.Second); j.Stats().Applies == applies; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the log, quiet for 10 s, was not applied")
				}
			}
		}
	}
	readsDone()
	if st := j.Stats(); st.Applies < 2 || reads < 20 {
		t.Errorf("%d reads, %d applies of the log: not reads while the log is applied", reads, st.Applies)
	}
	journaltest.CheckAndClose(t, j)
}
