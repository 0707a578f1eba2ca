package journal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

func FuzzDecodeInvocation(f *testing.F) {
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
		inv, err := journal.DecodeInvocation(b)
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
		inv2, err := journal.DecodeInvocation(enc)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, enc)
		}
		enc2, _ := json.Marshal(inv2)
		if !bytes.Equal(enc, enc2) || !reflect.DeepEqual(inv.Attempts, inv2.Attempts) {
			t.Fatalf("round trip changed the record:\n%s\n%s", enc, enc2)
		}
	})
}

func FuzzOpenDamaged(f *testing.F) {
	base := readFile(f, fuzzJournal(f))
	const page = 4096
	for _, s := range []struct {
		off   uint32
		data  []byte
		trunc uint32
	}{
		{0, nil, 0},                          // intact
		{0, nil, uint32(len(base) / 2)},      // truncated
		{0, nil, 2*page + 10},                // truncated right after the metas
		{16, []byte{0, 0, 0, 0}, 0},          // meta 0 magic
		{page + 16 + 56, []byte{0xff}, 0},    // meta 1 checksum
		{16 + 16, []byte{0xff, 0xff}, 0},     // meta 0 root page
		{2 * page, []byte{9}, 0},             // page 2 id
		{2*page + 8, []byte{0x7}, 0},         // page 2 flags
		{2*page + 10, []byte{0xff, 0xff}, 0}, // page 2 count
		{2*page + 12, []byte{0xff, 0xff, 0xff, 0x7f}, 0},
		{3*page + 16, []byte{0xff, 0xff, 0xff, 0xff}, 0},       // an element's position
		{3*page + 16 + 8, []byte{0x3, 0, 0, 0, 0, 0, 0, 0}, 0}, // a child page id
		{4*page + 16 + 4, []byte{0xff, 0xff}, 0},
		{5*page + 20, []byte{1, 2, 3, 4, 5, 6, 7, 8}, 0},
		{6*page + 100, bytes.Repeat([]byte{0xa5}, 64), 0},
		{uint32(len(base)) - 50, []byte("garbage"), 0},
	} {
		f.Add(s.off, s.data, s.trunc)
	}
	f.Fuzz(func(t *testing.T, off uint32, data []byte, trunc uint32) {
		b := bytes.Clone(base)
		if len(data) > 0 {
			copy(b[int(off)%len(b):], data)
		}
		if trunc > 0 {
			b = b[:int(trunc)%len(b)]
		}
		path := filepath.Join(t.TempDir(), "journal.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan string, 1)
		go func() { done <- openDamaged(path) }()
		select {
		case msg := <-done:
			if msg != "" {
				t.Fatal(msg)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Open or Check hangs")
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, b) {
			t.Fatal("the damaged file was modified")
		}
	})
}

// openDamaged opens a possibly damaged journal and, when it opens, runs
// Check and every query; it returns what went wrong, if anything.
func openDamaged(path string) string {
	j, err := journal.Open(path, &journal.Options{LockTimeout: 100 * time.Millisecond})
	if err != nil {
		if !errors.Is(err, journal.ErrDamaged) && !errors.Is(err, journal.ErrNotJournal) && !errors.Is(err, journal.ErrNewerSchema) {
			return "unexpected error: " + err.Error()
		}
		return ""
	}
	defer j.Close()
	probs, err := j.Check()
	if err != nil {
		return "check: " + err.Error()
	}
	_, err1 := j.Runs(journal.RunFilter{})
	_, err2 := j.Invocations(journal.Filter{})
	err3 := j.Export(new(bytes.Buffer), time.Time{}, false)
	if len(probs) == 0 && (err1 != nil || err2 != nil || err3 != nil) {
		return "Check found nothing, but reading failed: " + errors.Join(err1, err2, err3).Error()
	}
	return ""
}

// fuzzJournal is a small journal whose invocations bucket spans several
// pages under a branch page, so that mutations can reach every kind of page.
func fuzzJournal(t testing.TB) string {
	path := filepath.Join(t.TempDir(), "journal.db")
	j := journaltest.OpenPath(t, path, nil)
	run := newRun(t, j)
	for i := range 24 {
		in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Server: "fs", Tool: "write",
			Arguments: json.RawMessage(`{"data":"` + strings.Repeat("z", 300+i) + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		finish(t, j, in, journal.StateCompleted)
	}
	if err := j.SetRunStatus(run, journal.RunSucceeded, nil); err != nil {
		t.Fatal(err)
	}
	journaltest.CheckAndClose(t, j)
	return path
}
