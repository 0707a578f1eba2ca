package replay_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/replay"
)

// truthTable is the specification's table of all 27 annotation shapes,
// beside the rule's text in docs/replay.md. TestSafeTruthTable reads it
// from the repository and never skips: a missing table, or a changed row,
// fails.
const truthTable = "../docs/replay-truth-table.tsv"

func parseHint(t *testing.T, s string) replay.Hint {
	t.Helper()
	for _, h := range hints {
		if h.String() == s {
			return h
		}
	}
	t.Fatalf("bad hint %q in %s", s, truthTable)
	return 0
}

func TestSafeTruthTable(t *testing.T) {
	f, err := os.Open(truthTable)
	if err != nil {
		t.Fatalf("the truth table must be present: %v", err)
	}
	defer f.Close()
	// The table's 'why' text, with spaces and hyphens as underscores, starts
	// with the reason.
	why := map[string]replay.Reason{
		"declared idempotent":                  replay.ReasonDeclaredIdempotent,
		"declared read-only":                   replay.ReasonDeclaredReadOnly,
		"not declared idempotent or read-only": replay.ReasonNotDeclared,
		"contradictory read-only declaration":  replay.ReasonContradictoryReadOnly,
	}
	for text, reason := range why {
		if norm := strings.NewReplacer(" ", "_", "-", "_").Replace(text); !strings.HasPrefix(norm, string(reason)) {
			t.Errorf("why %q (%s) does not name reason %q", text, norm, reason)
		}
	}
	seen := map[replay.Annotations]bool{}
	rows, safe, header := 0, 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 5 {
			t.Fatalf("row %q has %d columns, want 5", line, len(cols))
		}
		if !header {
			if want := "readOnlyHint destructiveHint idempotentHint safe why"; strings.Join(cols, " ") != want {
				t.Fatalf("header %q, want %q", line, want)
			}
			header = true
			continue
		}
		a := replay.Annotations{ReadOnly: parseHint(t, cols[0]), Destructive: parseHint(t, cols[1]), Idempotent: parseHint(t, cols[2])}
		if seen[a] {
			t.Errorf("shape %+v listed twice", a)
		}
		seen[a] = true
		wantSafe := cols[3] == "yes"
		if cols[3] != "yes" && cols[3] != "no" {
			t.Fatalf("row %q: safe column %q", line, cols[3])
		}
		wantReason, ok := why[cols[4]]
		if !ok {
			t.Fatalf("row %q: unknown why %q", line, cols[4])
		}
		for _, o := range hints { // openWorldHint never matters
			a.OpenWorld = o
			if gotSafe, gotReason := replay.Safe(&a); gotSafe != wantSafe || gotReason != wantReason {
				t.Errorf("Safe(%+v) = %v, %q; table says %v, %q", a, gotSafe, gotReason, wantSafe, wantReason)
			}
		}
		rows++
		if wantSafe {
			safe++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != 27 || safe != 10 {
		t.Fatalf("table has %d rows, %d safe; want 27 and 10", rows, safe)
	}
}

// expect computes Decide's answer from the rule's text in docs/replay.md,
// independently of Safe.
func expect(in replay.Input) replay.Decision {
	switch {
	case in.Class == replay.ClassNotDelivered:
		return replay.Decision{Verdict: replay.NotApplicable, Reason: "not_delivered"}
	case in.Class != replay.ClassLost: // rule 1
		return replay.Decision{Verdict: replay.NotApplicable, Reason: "not_a_connection_loss"}
	case in.Read && in.Replays >= 3: // a read changes nothing, but is bounded
		return replay.Decision{Verdict: replay.OutcomeUnknown, Reason: "budget_spent"}
	case in.Read: // trust and annotations are not asked of a read
		return replay.Decision{Verdict: replay.Replay, Reason: "read_request"}
	case !in.ServerTrusted: // rule 2
		return replay.Decision{Verdict: replay.OutcomeUnknown, Reason: "server_not_trusted"}
	case !in.WorkspaceTrusted: // rule 3
		return replay.Decision{Verdict: replay.OutcomeUnknown, Reason: "workspace_not_trusted"}
	case in.Annotations == nil: // no annotations at all: not safe
		return replay.Decision{Verdict: replay.OutcomeUnknown, Reason: "no_annotations"}
	}
	a := *in.Annotations
	declaresReadOnly := a.ReadOnly == replay.True
	declaresIdempotent := a.Idempotent == replay.True
	contradiction := declaresReadOnly && (a.Destructive == replay.True || a.Idempotent == replay.False)
	var reason replay.Reason
	switch { // rule 4; contradictions are never safe
	case contradiction:
		return replay.Decision{Verdict: replay.OutcomeUnknown, Reason: "contradictory_read_only"}
	case declaresIdempotent:
		reason = "declared_idempotent"
	case declaresReadOnly:
		reason = "declared_read_only"
	default:
		return replay.Decision{Verdict: replay.OutcomeUnknown, Reason: "not_declared_idempotent_or_read_only"}
	}
	if in.Replays >= 3 { // the brief's bound
		return replay.Decision{Verdict: replay.OutcomeUnknown, Reason: "budget_spent"}
	}
	return replay.Decision{Verdict: replay.Replay, Reason: reason}
}

func TestDecideAllInputs(t *testing.T) {
	shapes := []*replay.Annotations{nil} // no annotations object at all
	for _, r := range hints {
		for _, d := range hints {
			for _, i := range hints {
				for _, o := range hints {
					shapes = append(shapes, &replay.Annotations{ReadOnly: r, Destructive: d, Idempotent: i, OpenWorld: o})
				}
			}
		}
	}
	var cases, replays, readReplays int
	reasons := map[replay.Reason]int{}
	for _, a := range shapes {
		for _, class := range failure.All {
			for _, serverTrusted := range []bool{false, true} {
				for _, workspaceTrusted := range []bool{false, true} {
					for _, n := range []int{0, 2, 3} {
						for _, read := range []bool{false, true} {
							in := replay.Input{
								Class:            class,
								ServerTrusted:    serverTrusted,
								WorkspaceTrusted: workspaceTrusted,
								Annotations:      a,
								Read:             read,
								Replays:          n,
							}
							got, want := replay.Decide(in), expect(in)
							if got != want {
								t.Errorf("Decide(%+v) with annotations %+v = %+v, want %+v", in, a, got, want)
							}
							cases++
							reasons[got.Reason]++
							switch {
							case got.Verdict == replay.Replay && read:
								readReplays++
							case got.Verdict == replay.Replay:
								replays++
							}
						}
					}
				}
			}
		}
	}
	// (1 + 27 shapes x 3 openWorld) x 9 classes x 2 x 2 trust x 3 counts x
	// 2 (a call, a read). A call replays only for 10 shapes x 3 openWorld,
	// both trusted, Lost, 2 counts; a read for every shape and trust, Lost,
	// 2 counts: the rule for calls is what it was.
	if len(shapes) != 82 || cases != 17712 || replays != 60 || readReplays != 82*4*2 {
		t.Errorf("%d shapes, %d cases, %d replays of calls, %d of reads; want 82, 17712, 60 and 656", len(shapes), cases, replays, readReplays)
	}
	if len(reasons) != 11 {
		t.Errorf("saw %d distinct reasons, want 11: %v", len(reasons), reasons)
	}
}

// TestJudgeRead: a read is replayed after a lost connection whatever the
// server's trust, the workspace's, or the annotations (none, malformed,
// contradictory), within the same budget as a call; the same views of a
// call are not.
func TestJudgeRead(t *testing.T) {
	views := []replay.View{
		{},
		{Annotations: json.RawMessage(`{"readOnlyHint":true,"idempotentHint":false}`)},
		{Annotations: json.RawMessage(`{"idempotentHint":null}`)},
		{ServerTrusted: true},
		{WorkspaceTrusted: true, Missing: true},
	}
	for _, v := range views {
		for _, n := range []int{0, 2, 3} {
			call := replay.Judge(v, n)
			v.Read = true
			got := replay.Judge(v, n)
			v.Read = false
			want := replay.Decision{Verdict: replay.Replay, Reason: replay.ReasonReadRequest}
			if n >= replay.MaxReplays {
				want = replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonBudgetSpent}
			}
			if got != want {
				t.Errorf("Judge(%+v as a read, %d replays) = %+v, want %+v", v, n, got, want)
			}
			if call.Verdict == replay.Replay {
				t.Errorf("Judge(%+v as a call, %d replays) = %+v: not safe", v, n, call)
			}
		}
	}
	sendTime, now := replay.View{Read: true}, replay.View{Read: true}
	if d := replay.JudgeBoth(sendTime, now, 0); d.Verdict != replay.Replay || d.Reason != replay.ReasonReadRequest {
		t.Errorf("JudgeBoth of two read views = %+v", d)
	}
}

func TestDecideNoAnnotations(t *testing.T) {
	for _, n := range []int{0, 3} {
		in := replay.Input{Class: replay.ClassLost, ServerTrusted: true, WorkspaceTrusted: true, Replays: n}
		want := replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonNoAnnotations}
		if got := replay.Decide(in); got != want {
			t.Errorf("Decide(%+v) = %+v, want %+v", in, got, want)
		}
	}
	if ok, reason := replay.Safe(nil); ok || reason != "no_annotations" {
		t.Errorf("Safe(nil) = %v, %q", ok, reason)
	}
}

func TestDecideBudget(t *testing.T) {
	readOnly := &replay.Annotations{ReadOnly: replay.True}
	for _, tc := range []struct {
		budget, replays int
		want            replay.Verdict
	}{
		{0, 2, replay.Replay}, {0, 3, replay.OutcomeUnknown},
		{1, 0, replay.Replay}, {1, 1, replay.OutcomeUnknown},
		{5, 4, replay.Replay}, {5, 5, replay.OutcomeUnknown},
		{-1, 0, replay.OutcomeUnknown},
	} {
		got := replay.Decide(replay.Input{Class: replay.ClassLost, ServerTrusted: true, WorkspaceTrusted: true,
			Annotations: readOnly, Budget: tc.budget, Replays: tc.replays})
		wantReason := replay.ReasonDeclaredReadOnly
		if tc.want != replay.Replay {
			wantReason = replay.ReasonBudgetSpent
		}
		if got.Verdict != tc.want || got.Reason != wantReason {
			t.Errorf("budget %d, replays %d: %+v, want %v %q", tc.budget, tc.replays, got, tc.want, wantReason)
		}
	}
	if replay.MaxReplays != 3 {
		t.Errorf("MaxReplays = %d, want 3", replay.MaxReplays)
	}
}

func TestBoth(t *testing.T) {
	idem := replay.Decision{Verdict: replay.Replay, Reason: replay.ReasonDeclaredIdempotent}
	ro := replay.Decision{Verdict: replay.Replay, Reason: replay.ReasonDeclaredReadOnly}
	untrusted := replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonServerNotTrusted}
	missing := replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonToolMissing}
	none := replay.Decision{Verdict: replay.OutcomeUnknown, Reason: replay.ReasonNoAnnotations}
	for _, tc := range []struct{ send, fresh, want replay.Decision }{
		{idem, ro, ro},
		{ro, idem, idem},
		{idem, untrusted, untrusted},
		{idem, missing, missing},
		{none, idem, none},
		{none, missing, none},
	} {
		if got := replay.Both(tc.send, tc.fresh); got != tc.want {
			t.Errorf("Both(%+v, %+v) = %+v, want %+v", tc.send, tc.fresh, got, tc.want)
		}
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[replay.Verdict]string{
		replay.NotApplicable: "not_applicable", replay.Replay: "replay",
		replay.OutcomeUnknown: "outcome_unknown",
	} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%q).String() = %q, want %q", string(v), got, want)
		}
	}
}
