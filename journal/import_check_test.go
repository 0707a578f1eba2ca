package journal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// finishedRun writes a run with one completed call, ended as status.
func finishedRun(t *testing.T, j journal.Store, status journal.RunStatus) (journal.ID, journal.ID) {
	t.Helper()
	run := newRun(t, j)
	in := begin(t, j, run, "srv", "t")
	finish(t, j, in, journal.StateCompleted)
	if err := j.SetRunStatus(run, status, nil); err != nil {
		t.Fatal(err)
	}
	return run, in.ID
}

// record is one line of an archive, decoded: {"run": {…}} or
// {"invocation": {…}}.
type record map[string]map[string]any

// tamper rewrites the archive's records of run: fn changes each (kind is
// "run" or "invocation") in place.
func tamper(t *testing.T, archive []byte, run journal.ID, fn func(kind string, rec map[string]any)) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(archive, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		for kind, rec := range r {
			if rec["id"] == run.String() || rec["run_id"] == run.String() {
				fn(kind, rec)
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(b, '\n'))
	}
	return out.Bytes()
}

// badRun is a run that breaks one of the journal's rules in an archive.
type badRun struct {
	name string
	// write writes the run into src as the journal would (its invocation
	// is the one the problem is about, when it is about one).
	write func(t *testing.T, src journal.Store) (run, inv journal.ID)
	// tamper makes it break the rule in the archive.
	tamper func(kind string, rec map[string]any)
	// want is what the error says of it, after its line ({run} and {inv}
	// stand for the ids write returned).
	want string
	// sealed: the case needs an encrypted journal.
	sealed bool
}

var badRuns = []badRun{
	{
		name: "an intent without an attempt",
		write: func(t *testing.T, src journal.Store) (journal.ID, journal.ID) {
			run := newRun(t, src)
			return run, begin(t, src, run, "srv", "pay").ID // in flight, as after a crash
		},
		tamper: func(kind string, rec map[string]any) {
			if kind == "invocation" {
				rec["attempts"] = []any{}
			}
		},
		want: "run {run}: invocation {inv}: state intent without an intent (no attempts)",
	},
	{
		name: "a succeeded run with an unsettled invocation",
		write: func(t *testing.T, src journal.Store) (journal.ID, journal.ID) {
			return finishedRun(t, src, journal.RunSucceeded)
		},
		tamper: func(kind string, rec map[string]any) {
			if kind == "invocation" { // back in flight: its attempt open again
				rec["state"] = "intent"
				delete(rec, "result")
				delete(rec["attempts"].([]any)[0].(map[string]any), "ended_at")
			}
		},
		want: "run {run}: succeeded while invocation {inv} is intent",
	},
	{
		name: "an idempotency key that is not the invocation's",
		write: func(t *testing.T, src journal.Store) (journal.ID, journal.ID) {
			return finishedRun(t, src, journal.RunFailed)
		},
		tamper: func(kind string, rec map[string]any) {
			if kind == "invocation" {
				rec["idempotency_key"] = "01a00000-0000-7000-8000-000000000001"
			}
		},
		want: `run {run}: invocation {inv}: idempotency key "01a00000-0000-7000-8000-000000000001" is not the invocation id`,
	},
	{
		name: "a running run with a finish time",
		write: func(t *testing.T, src journal.Store) (journal.ID, journal.ID) {
			run, _ := finishedRun(t, src, journal.RunSucceeded)
			return run, journal.ID{}
		},
		tamper: func(kind string, rec map[string]any) {
			if kind == "run" {
				rec["status"] = "running"
			}
		},
		want: "run {run}: status running but finished_at",
	},
	{
		name: "payloads whose seal was removed",
		write: func(t *testing.T, src journal.Store) (journal.ID, journal.ID) {
			return finishedRun(t, src, journal.RunSucceeded)
		},
		tamper: func(_ string, rec map[string]any) {
			if rec["sealed"] == nil {
				panic("the record has no sealed payload to strip")
			}
			delete(rec, "sealed")
		},
		want:   `run {run}: invocation {inv}: state completed without its arguments, sealed or in clear (was "sealed" removed from the archive?)`,
		sealed: true,
	},
}

// TestImportRefusesWhatCheckRejects: a run of an archive that breaks a
// rule Check applies — or that lost its payloads — is refused whole, with
// its line, its id, its invocation's and what is wrong; the runs before
// and after it are imported; the journal holds nothing of it and passes
// Check. Fixed, the archive imports the refused run and leaves the others.
func TestImportRefusesWhatCheckRejects(t *testing.T) {
	key := journal.NewKey()
	for _, bad := range badRuns {
		t.Run(bad.name, func(t *testing.T) {
			var opts *journal.Options
			if bad.sealed {
				opts = &journal.Options{Key: key}
			}
			src := journaltest.Open(t, opts)
			before, _ := finishedRun(t, src, journal.RunSucceeded)
			run, inv := bad.write(t, src)
			after, _ := finishedRun(t, src, journal.RunSucceeded)
			good := archive(t, src, false)
			in := tamper(t, good, run, bad.tamper)
			want := "\n  line 3: " + strings.NewReplacer("{run}", run.String(), "{inv}", inv.String()).Replace(bad.want)
			journaltest.Each(t, opts, func(t *testing.T, j journal.Store) {
				rep, err := j.Import(bytes.NewReader(in))
				var ie *journal.ImportError
				if !errors.As(err, &ie) || !errors.Is(err, journal.ErrInvalid) || len(ie.Runs) != 1 || ie.Runs[0].Run != run || ie.Runs[0].Line != 3 {
					t.Fatalf("import: %v; want run %s on line 3 refused", err, run)
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("import: %v\nwant it to say %q", err, want)
				}
				if rep.Runs != 2 || rep.Invocations != 2 {
					t.Errorf("import wrote %d runs and %d invocations, want the 2 good runs and their calls", rep.Runs, rep.Invocations)
				}
				wantOnly(t, j, []journal.ID{run}, before, after)
				// Fixed, the archive imports what was refused.
				rep, err = j.Import(bytes.NewReader(good))
				if err != nil || rep.Runs != 1 || rep.Present != 4 {
					t.Fatalf("import of the fixed archive: %+v, %v; want the refused run written, the others present", rep, err)
				}
				if _, err := j.Run(run); err != nil {
					t.Errorf("the refused run after the fixed archive's import: %v", err)
				}
			})
		})
	}
}

// TestImportNamesEveryRefusedRun: one import of an archive with several
// bad runs names each, in the archive's order, and writes only the good
// ones.
func TestImportNamesEveryRefusedRun(t *testing.T) {
	opts := &journal.Options{Key: journal.NewKey()}
	src := journaltest.Open(t, opts)
	first, _ := finishedRun(t, src, journal.RunSucceeded)
	var refused []journal.ID
	for _, b := range badRuns {
		run, _ := b.write(t, src)
		refused = append(refused, run)
	}
	last, _ := finishedRun(t, src, journal.RunSucceeded)
	in := archive(t, src, false)
	for i, b := range badRuns {
		in = tamper(t, in, refused[i], b.tamper)
	}
	journaltest.Each(t, opts, func(t *testing.T, j journal.Store) {
		rep, err := j.Import(bytes.NewReader(in))
		var ie *journal.ImportError
		if !errors.As(err, &ie) || len(ie.Runs) != len(badRuns) {
			t.Fatalf("import: %v; want the %d bad runs refused", err, len(badRuns))
		}
		for i, b := range badRuns {
			if ie.Runs[i].Run != refused[i] || !strings.Contains(err.Error(), "run "+refused[i].String()+": ") {
				t.Errorf("refused run %d: %s, want %s (%s) named", i, ie.Runs[i].Run, refused[i], b.name)
			}
		}
		if rep.Runs != 2 {
			t.Errorf("import wrote %d runs, want the 2 good ones", rep.Runs)
		}
		wantOnly(t, j, refused, first, last)
	})
}

// wantOnly fails t unless j holds the runs keep, each with its one
// invocation, and nothing of the runs refused, and passes Check.
func wantOnly(t *testing.T, j journal.Store, refused []journal.ID, keep ...journal.ID) {
	t.Helper()
	for _, run := range refused {
		if r, err := j.Run(run); !errors.Is(err, journal.ErrNotFound) {
			t.Errorf("refused run %s was written: %+v, %v", run, r, err)
		}
		if invs, err := j.RunInvocations(run); err != nil || len(invs) != 0 {
			t.Errorf("invocations of refused run %s: %d, %v; want none", run, len(invs), err)
		}
	}
	if invs, err := j.Invocations(journal.Filter{}); err != nil || len(invs) != len(keep) {
		t.Errorf("the journal holds %d invocations, %v; want the %d of the good runs", len(invs), err, len(keep))
	}
	for _, id := range keep {
		if _, err := j.Run(id); err != nil {
			t.Errorf("good run %s: %v", id, err)
		}
	}
	if probs, err := j.Check(); err != nil || len(probs) != 0 {
		t.Errorf("check after the import: %v, %v", probs, err)
	}
}
