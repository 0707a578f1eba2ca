package journal_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// fillForArchive writes runs that use every part of a record: approvals
// requested and decided, several attempts, decisions, a resolution, a
// tool error, fan-out items, sealed payloads, a run left running.
func fillForArchive(t *testing.T, j journal.Store) {
	t.Helper()
	run := newRun(t, j)
	if _, err := j.RequestApproval(run, "deploy", "Roll out?"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.DecideApproval(run, "deploy", journal.ApprovalApproved, "alice", "ticket 42"); err != nil {
		t.Fatal(err)
	}
	in := begin(t, j, run, "srv", "upper")
	finish(t, j, in, journal.StateAborted)
	again, err := j.Again(in.ID, journal.NextAttempt{Kind: journal.KindReplay,
		Decision: &journal.Decision{Attempt: 1, Verdict: verdict.Replay, Reason: "declared_idempotent", View: verdict.SendTime}})
	if err != nil {
		t.Fatal(err)
	}
	finish(t, j, again, journal.StateCompleted)
	lost := begin(t, j, run, "srv", "pay")
	if err := j.Interrupted(lost.ID, journal.Outcome{State: journal.StateOutcomeUnknown, Failure: "crash"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Resolve(lost.ID, journal.Resolution{By: "bob", Why: "the ledger has it", As: journal.StateCompleted}, &journal.Result{Content: []byte(`[{"type":"text","text":"row 7"}]`)}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		it, err := j.Begin(&journal.Invocation{RunID: run, Step: "fan", Item: i, Server: "srv", Tool: "t", Arguments: []byte(`{"i":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Finish(it, journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{IsError: i == 1, Content: []byte(`[]`)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.EndRun(run, journal.RunSucceeded, nil, map[string]any{"out": "x"}); err != nil {
		t.Fatal(err)
	}
	left := newRun(t, j) // running, as after a crash
	begin(t, j, left, "srv", "pay")
}

func archive(t *testing.T, j journal.Store, decrypt bool) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := j.Archive(&b, decrypt); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestArchiveRoundTrips: a journal archived and imported into another
// backend — bbolt to PostgreSQL and back — holds every record as it was:
// the archive of the copy is the archive of the original, byte for byte
// (attempts, decisions, resolutions, approvals, sealed payloads). Importing
// again writes nothing; the copy passes Check; its payloads read back with
// the key.
func TestArchiveRoundTrips(t *testing.T) {
	key := journal.NewKey()
	opts := &journal.Options{Key: key}
	file := func() string { return filepath.Join(t.TempDir(), "journal.db") }
	journaltest.RequirePostgres(t)
	for _, tc := range []struct{ name, from, to string }{
		{"bbolt to postgres", file(), journaltest.PostgresURL(t)},
		{"postgres to bbolt", journaltest.PostgresURL(t), file()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := journaltest.OpenStore(t, tc.from, opts)
			fillForArchive(t, src)
			want := archive(t, src, false)
			if n := bytes.Count(want, []byte("\n")); n != 2+6 {
				t.Fatalf("archive has %d lines, want 2 runs and 6 invocations:\n%s", n, want)
			}
			dst := journaltest.OpenStore(t, tc.to, opts)
			rep, err := dst.Import(bytes.NewReader(want))
			if err != nil || rep.Runs != 2 || rep.Invocations != 6 || rep.Present != 0 {
				t.Fatalf("import: %+v, %v", rep, err)
			}
			if got := archive(t, dst, false); !bytes.Equal(got, want) {
				t.Fatalf("the copy's archive differs:\n got %s\nwant %s", got, want)
			}
			if got, want := archive(t, dst, true), archive(t, src, true); !bytes.Equal(got, want) {
				t.Fatalf("decrypted, the copy differs:\n got %s\nwant %s", got, want)
			}
			if !bytes.Contains(archive(t, dst, true), []byte(`"row 7"`)) || bytes.Contains(want, []byte(`"row 7"`)) {
				t.Fatal("payloads: want sealed in the archive, readable in the copy with the key")
			}
			rep, err = dst.Import(bytes.NewReader(want))
			if err != nil || rep.Present != 8 || rep.Runs+rep.Invocations != 0 {
				t.Fatalf("second import: %+v, %v; want all 8 present", rep, err)
			}
		})
	}
}

// TestImportRefuses: lines that are not an archive's, an invocation whose
// run is missing, and payloads sealed with another key are refused with
// the line's number.
func TestImportRefuses(t *testing.T) {
	key := journal.NewKey()
	src := journaltest.Open(t, &journal.Options{Key: key})
	fillForArchive(t, src)
	whole := archive(t, src, false)
	lines := bytes.SplitAfter(whole, []byte("\n"))
	journaltest.Each(t, &journal.Options{Key: journal.NewKey()}, func(t *testing.T, j journal.Store) {
		for _, tc := range []struct {
			name, in, want string
		}{
			{"an export of invocations", strings.TrimSuffix(strings.TrimPrefix(string(lines[2]), `{"invocation":`), "}\n"), "line 1: not a line of an archive"},
			{"not JSON", "{\n", "line 1: not JSON"},
			{"a run without its id", `{"run": {"status": "running"}}`, "line 1: a run without a valid id"},
			{"an orphan invocation", string(lines[2]), "line 1: invocation"},
			{"another key", string(whole), "line 1: run"},
		} {
			_, err := j.Import(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
			}
		}
		_, err := j.Import(bytes.NewReader(whole))
		if !errors.Is(err, journal.ErrWrongKey) {
			t.Errorf("another key: %v, want ErrWrongKey", err)
		}
		if runs, _ := j.Runs(journal.RunFilter{}); len(runs) != 0 {
			t.Errorf("refused imports wrote %d runs", len(runs))
		}
	})
	// An import that stops at a bad line keeps the runs before it whole,
	// and writes nothing of the run the line is in.
	journaltest.Each(t, &journal.Options{Key: key}, func(t *testing.T, j journal.Store) {
		in := bytes.Join(lines[:7], nil) // the first run, its 5 invocations, the second run
		in = append(in, `{"invocation": {"id": 1}}`+"\n"...)
		rep, err := j.Import(bytes.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), "line 8:") || rep.Runs != 1 || rep.Invocations != 5 {
			t.Fatalf("import stopped at line 8: %+v, %v", rep, err)
		}
		runs, err := j.Runs(journal.RunFilter{})
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs after a stopped import: %d, %v; want the first only", len(runs), err)
		}
		if invs, err := j.RunInvocations(runs[0].ID); err != nil || len(invs) != 5 {
			t.Fatalf("the first run has %d invocations, %v; want 5", len(invs), err)
		}
		rep, err = j.Import(bytes.NewReader(whole))
		if err != nil || rep.Runs != 1 || rep.Present != 6 {
			t.Fatalf("import again: %+v, %v; want the second run, the first present", rep, err)
		}
	})
}

// TestImportRefusesAnIdOfTheOtherKind: ids are unique across runs and
// invocations; an archive whose run takes an invocation's id, or whose
// invocation takes a run's, is refused and writes nothing of that run.
func TestImportRefusesAnIdOfTheOtherKind(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		inv := begin(t, j, run, "srv", "t")
		src := journaltest.Open(t, nil)
		srcRun := newRun(t, src)
		srcInv := begin(t, src, srcRun, "srv", "t")
		whole := string(archive(t, src, false))
		for _, tc := range []struct {
			name string
			in   string
			id   journal.ID
		}{
			{"a run with an invocation's id", strings.ReplaceAll(whole, srcRun.String(), inv.ID.String()), inv.ID},
			{"an invocation with a run's id", strings.ReplaceAll(whole, srcInv.ID.String(), run.String()), srcRun},
		} {
			rep, err := j.Import(strings.NewReader(tc.in))
			if !errors.Is(err, journal.ErrExists) || !strings.Contains(err.Error(), "both a run's and an invocation's") || rep.Runs != 0 {
				t.Errorf("%s: %+v, %v; want refused", tc.name, rep, err)
			}
			if r, err := j.Run(tc.id); tc.id != inv.ID && (err == nil || r != nil) {
				t.Errorf("%s: run %s was written: %v", tc.name, tc.id, err)
			}
		}
		if runs, err := j.Runs(journal.RunFilter{}); err != nil || len(runs) != 1 {
			t.Errorf("runs after the refused imports: %d, %v; want the first only", len(runs), err)
		}
	})
}
