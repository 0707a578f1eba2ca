package journal

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/internal/verdict"
)

// Values the random invocations are made of: ordinary ones, which the
// encoder writes itself, and every kind it must leave to encoding/json.
var (
	encStrings = []string{"", "s1", "hello world", "sha256:0f", `say "hi"`, `a\b`, "<tag>", "a&b",
		"ünïcode", "\xff\xfe", "line\nbreak", "\u2028", "\x7f", "tab\t", "\x00"}
	encRaws = []string{"", `{}`, `{"n":1}`, ` { "a" : [1, 2 ,3] } `, `"<b>&"`, "\"\u2028 x\u2029\"",
		`[{"type":"text","text":"hi there"}]`, `{"a":`, `000`, `nul`, "\"\xff\"", `1e400`, `"\u003c"`,
		"\t[\n]\r", `{"k":"\xe2\x80"}`, `null`}
	encZones = []*time.Location{time.UTC, time.FixedZone("X", 3600), time.FixedZone("Y", -(23*3600 + 59*60)), time.FixedZone("Z", 24*3600)}
)

func randInv(r *rand.Rand) *Invocation {
	// Odd values are rare, so that most records hold at most one: a record
	// with one is all left to encoding/json.
	str := func() string {
		if r.IntN(40) > 0 {
			return encStrings[r.IntN(4)]
		}
		return encStrings[r.IntN(len(encStrings))]
	}
	raw := func() json.RawMessage {
		s := encRaws[r.IntN(len(encRaws))]
		if r.IntN(10) > 0 {
			s = encRaws[r.IntN(7)]
		}
		if s == "" && r.IntN(2) == 0 {
			return nil
		}
		return json.RawMessage(s)
	}
	tm := func() time.Time {
		switch r.IntN(80) {
		case 0:
			return time.Time{}
		case 1:
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		case 2:
			return time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
		case 3:
			return time.Unix(r.Int64N(1<<34), 0).In(encZones[r.IntN(len(encZones))])
		}
		return time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).UTC()
	}
	state := func() State { return State(r.IntN(int(numStates) + 1)) }
	id := func() (id ID) {
		for i := range id {
			id[i] = byte(r.Uint32())
		}
		return id
	}
	trust := Trust{Server: r.IntN(2) == 0, Workspace: r.IntN(2) == 0, WorkspaceSource: str()}
	inv := &Invocation{ID: id(), RunID: id(), Step: str(), Item: r.IntN(5) - 1, Server: str(), Tool: str(),
		Arguments: raw(), ArgumentsDigest: str(), Annotations: raw(), Trust: trust, IdempotencyKey: str(),
		State: state(), Sealed: str(), ToolError: r.IntN(2) == 0, CreatedAt: tm(), UpdatedAt: tm()}
	if r.IntN(2) == 0 {
		inv.Method = []Method{MethodRead, MethodPrompt, Method(str())}[r.IntN(3)]
	}
	if n := r.IntN(4) - 1; n >= 0 {
		inv.Attempts = make([]Attempt, n)
		for i := range inv.Attempts {
			a := Attempt{N: i + 1, SentAt: tm(), Kind: AttemptKind(str()), Replay: r.IntN(2) == 0, Failure: failure.Class(str()), Detail: str(), Interrupted: r.IntN(3) == 0, Annotations: raw()}
			if r.IntN(2) == 0 {
				end := tm()
				a.EndedAt = &end
			}
			if r.IntN(2) == 0 {
				a.Trust = &Trust{Server: r.IntN(2) == 0, WorkspaceSource: str()}
			}
			inv.Attempts[i] = a
		}
	}
	if r.IntN(2) == 0 {
		inv.Result = &Result{Content: raw(), StructuredContent: raw(), IsError: r.IntN(2) == 0}
	}
	if r.IntN(3) == 0 {
		inv.Error = &Error{Code: str(), Message: str()}
	}
	for range r.IntN(3) {
		inv.Decisions = append(inv.Decisions, Decision{Attempt: r.IntN(3), At: tm(), Verdict: verdict.Verdict(str()), Reason: str(), View: verdict.View(str())})
	}
	for range r.IntN(3) {
		inv.Resolutions = append(inv.Resolutions, Resolution{By: str(), At: tm(), As: state(), Why: str(), From: state()})
	}
	return inv
}

// plainInv is an invocation as a step writes it: nothing in it needs
// encoding/json.
func plainInv(r *rand.Rand) *Invocation {
	now := time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).UTC()
	end := now.Add(time.Duration(r.Int64N(1e9)))
	ann := json.RawMessage(`{"idempotentHint":true}`)
	return &Invocation{ID: NewID(), RunID: NewID(), Step: "s12", Item: -1, Server: "s", Tool: "t",
		Arguments: json.RawMessage(`{"n": 13, "s": "a <b> & c"}`), ArgumentsDigest: Digest([]byte("x")),
		Annotations: ann, IdempotencyKey: NewID().String(), State: StateCompleted,
		Attempts:  []Attempt{{N: 1, SentAt: now, Kind: KindFirst, EndedAt: &end, Failure: failure.ToolError, Trust: &Trust{}, Annotations: ann}},
		Result:    &Result{Content: json.RawMessage(`[{"type":"text","text":"13 \u2028"}]`), StructuredContent: json.RawMessage(`{"n":13}`)},
		CreatedAt: now, UpdatedAt: end}
}

// TestMarshalInvIsJSONMarshal compares the record encoder with
// encoding/json on random invocations: the same bytes, or the same error.
func TestMarshalInvIsJSONMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fast := 0
	for i := range 20000 {
		inv := randInv(r)
		if i%4 == 0 {
			inv = plainInv(r)
		}
		e := recordEncoder{}
		e.inv(inv)
		if !e.slow {
			fast++
		}
		sameAsJSON(t, inv)
	}
	// Most records are written by the encoder itself, not left to
	// encoding/json (a quarter are plain, and some random ones are too).
	if fast < 5000 {
		t.Fatalf("%d of 20000 records encoded without encoding/json, want at least 5000", fast)
	}
}

func sameAsJSON(t *testing.T, inv *Invocation) {
	t.Helper()
	got, gotErr := marshalInv(inv)
	want, wantErr := json.Marshal(inv)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("error %v, encoding/json's %v", gotErr, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%s\nencoding/json\n%s", got, want)
	}
}

// TestMarshalInvOfAStep pins that a step's record never falls back to
// encoding/json: payloads with spaces and HTML characters included.
func TestMarshalInvOfAStep(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		inv := plainInv(r)
		e := recordEncoder{}
		if e.inv(inv); e.slow {
			t.Fatalf("a step's invocation left to encoding/json: %+v", inv)
		}
		sameAsJSON(t, inv)
	}
}

func FuzzMarshalInv(f *testing.F) {
	f.Add("s", "detail", []byte(`{"n":1}`), []byte(`[{"type":"text","text":"x"}]`), int64(1700000000123456789), 3600)
	f.Add("<s>", "say \"x\"", []byte(` {"a" : "<&>"} `), []byte("\"\u2028\""), int64(-62135596800000000), 0)
	f.Add("", "", []byte(`000`), []byte(`{"a":`), int64(0), -1)
	f.Fuzz(func(t *testing.T, step, detail string, args, content []byte, nanos int64, zone int) {
		at := time.Unix(0, nanos).UTC()
		if zone >= 0 {
			at = at.In(time.FixedZone("F", zone%(48*3600)))
		}
		inv := &Invocation{ID: NewID(), RunID: NewID(), Step: step, Item: zone, Server: "s", Tool: detail,
			Arguments: args, State: StateFailed, CreatedAt: at, UpdatedAt: at.UTC(),
			Attempts: []Attempt{{N: 1, SentAt: at, Detail: detail, Annotations: content}},
			Result:   &Result{Content: content, StructuredContent: args, IsError: true}}
		sameAsJSON(t, inv)
	})
}

// TestMarshalInvAllocatesOnce: a step's record and its checksum fit the
// buffer invSize asks for (a buffer that grows is copied each time), HTML
// in its payloads included.
func TestMarshalInvAllocatesOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		inv := plainInv(r)
		inv.Decisions = []Decision{{Attempt: 1, At: inv.CreatedAt, Verdict: "replay_allowed", Reason: "idempotent", View: "send_time"}}
		inv.Error = &Error{Code: "outcome_unknown", Message: "the call may have run"}
		if r.IntN(2) == 0 { // each <, > and & takes six bytes in the record
			inv.Result.Content = json.RawMessage(`[{"type":"text","text":"` + strings.Repeat("<p>&amp;</p>", 200) + "\u2028\"}]")
		}
		if n := testing.AllocsPerRun(10, func() {
			b, err := marshalInv(inv)
			if err != nil {
				t.Fatal(err)
			}
			AddChecksum(b)
		}); n != 1 {
			t.Fatalf("%v allocations to encode and seal a record, want 1", n)
		}
	}
}
