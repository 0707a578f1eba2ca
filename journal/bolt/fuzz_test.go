package bolt_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

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
	j, err := bolt.Open(path, &journal.Options{LockTimeout: 100 * time.Millisecond})
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
