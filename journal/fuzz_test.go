package journal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

func FuzzParseInvocation(f *testing.F) {
	end := time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)
	valid, _ := json.Marshal(journal.Invocation{
		ID: journal.NewID(), RunID: journal.NewID(), Step: "s", Item: -1, Server: "srv", Tool: "t",
		Arguments: json.RawMessage(`{"a":[1,2]}`), Annotations: json.RawMessage(`{"readOnlyHint":true}`),
		State: journal.StateCompleted, Attempts: []journal.Attempt{{N: 1, SentAt: end, EndedAt: &end, Failure: "connection_lost"}},
		Resolutions: []journal.Resolution{{By: "op", As: journal.StateCompleted, From: journal.StateOutcomeUnknown}},
	})
	for _, s := range [][]byte{
		valid, valid[:len(valid)/2], nil, []byte("{}"), []byte("null"), []byte("[]"), []byte(`"x"`),
		bytes.Replace(valid, []byte(`"completed"`), []byte(`"done"`), 1),
		bytes.Replace(valid, []byte(`"completed"`), []byte(`7`), 1),
		bytes.Replace(valid, []byte(`"run_id":"`), []byte(`"run_id":"zz`), 1),
		bytes.Replace(valid, []byte(`"n":1`), []byte(`"n":1e999`), 1),
		bytes.Replace(valid, []byte(`2030-`), []byte(`99999-`), 1),
		// Found by fuzzing: a resolution without states used to decode.
		[]byte(`{"id":"00000000-0000-0000-0000-000000000001","run_id":"00000000-0000-0000-0000-000000000001","stAte":"completed","resolutions":[{}]}`),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		inv, err := journal.ParseInvocation(b)
		if err != nil {
			if inv != nil || !errors.Is(err, journal.ErrDamaged) {
				t.Fatalf("error %v (record %v), want ErrDamaged and no record", err, inv)
			}
			return
		}
		// A decoded record survives a round trip unchanged.
		enc, err := json.Marshal(inv)
		if err != nil {
			t.Skip("decodes but cannot be re-encoded:", err) // e.g. a time zone that moves the year past 9999
		}
		inv2, err := journal.ParseInvocation(enc)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, enc)
		}
		enc2, _ := json.Marshal(inv2)
		if !bytes.Equal(enc, enc2) || !reflect.DeepEqual(inv.Attempts, inv2.Attempts) {
			t.Fatalf("round trip changed the record:\n%s\n%s", enc, enc2)
		}
	})
}
