package bolt_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// smallJournal makes a closed journal file with a few records and returns
// its path.
func smallJournal(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	j := journaltest.OpenPath(t, path, nil)
	for range 3 {
		run := newRun(t, j)
		finish(t, j, begin(t, j, run, "fs", "read"), done)
		finish(t, j, begin(t, j, run, "fs", "write"), unknown)
		if err := j.SetRunStatus(run, journal.RunBlocked, nil); err != nil {
			t.Fatal(err)
		}
	}
	journaltest.CheckAndClose(t, j)
	return path
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refused asserts that Open fails with want and leaves the file as it was.
func refused(t *testing.T, path string, want error) {
	t.Helper()
	before := readFile(t, path)
	for _, ro := range []bool{false, true} {
		j, err := bolt.Open(path, &journal.Options{ReadOnly: ro, LockTimeout: 100 * time.Millisecond})
		if err == nil {
			j.Close()
			t.Fatalf("Open(ReadOnly=%v) accepted the file", ro)
		}
		if !errors.Is(err, want) {
			t.Errorf("Open(ReadOnly=%v) = %v, want %v", ro, err, want)
		}
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("refused file was modified")
	}
}

func TestOpenRefusesNonJournals(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	random := make([]byte, 64<<10)
	rand.Read(random)
	boltDB := func(name string, buckets ...string) string {
		p := filepath.Join(dir, name)
		db, err := bbolt.Open(p, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bbolt.Tx) error {
			for _, b := range buckets {
				bk, err := tx.CreateBucket([]byte(b))
				if err != nil {
					return err
				}
				if err := bk.Put([]byte("k"), []byte("v")); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		return p
	}
	for _, c := range []struct {
		name, path string
		want       error
	}{
		{"random bytes", write("random", random), journal.ErrNotJournal},
		{"text file", write("text", []byte("name: deploy\nsteps: []\n")), journal.ErrNotJournal},
		{"empty file", write("empty", nil), journal.ErrNotJournal},
		{"bolt db with other buckets", boltDB("other.db", "users", "sessions"), journal.ErrNotJournal},
		{"bolt db without buckets", boltDB("bare.db"), journal.ErrNotJournal},
		{"bolt db with a foreign meta bucket", boltDB("meta.db", "meta"), journal.ErrNotJournal},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, c.path, c.want) })
	}
	if _, err := bolt.Open(dir, nil); !errors.Is(err, journal.ErrNotJournal) {
		t.Errorf("directory: %v", err)
	}
	if _, err := bolt.Open(filepath.Join(dir, "none.db"), &journal.Options{ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file, read-only: %v", err)
	}
}

func TestOpenRefusesDamagedFiles(t *testing.T) {
	good := readFile(t, smallJournal(t))
	const page = 4096
	damage := func(name string, f func([]byte) []byte) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, f(bytes.Clone(good)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name string
		f    func([]byte) []byte
	}{
		{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }},
		{"truncated to three pages", func(b []byte) []byte { return b[:3*page] }},
		{"truncated inside the meta pages", func(b []byte) []byte { return b[:page+100] }},
		{"both meta checksums broken", func(b []byte) []byte { b[16+56] ^= 1; b[page+16+56] ^= 1; return b }},
		{"every page after the metas zeroed", func(b []byte) []byte { clear(b[2*page:]); return b }},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, damage(c.name, c.f), journal.ErrDamaged) })
	}
}

// A meta page broken (a torn write of the last commit, say) makes bbolt
// fall back to the commit before; what that commit lacks is still in the
// log, and the open (even a read-only one) applies it again, so nothing
// is lost.
func TestOpenWithOneBrokenMetaPageUsesTheOtherAndLosesNothing(t *testing.T) {
	path := smallJournal(t)
	b := readFile(t, path)
	// The meta page with the higher transaction id is the current one;
	// break its checksum so that bbolt falls back to the previous one.
	txid := func(p int) uint64 { return binary.NativeEndian.Uint64(b[p*4096+16+48:]) }
	cur := 0
	if txid(1) > txid(0) {
		cur = 1
	}
	b[cur*4096+16+56] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	j := journaltest.OpenPath(t, path, &journal.Options{ReadOnly: true})
	runs, err := j.Runs(journal.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	for _, r := range runs {
		invs, err := j.RunInvocations(r.ID)
		if err != nil || len(invs) != 2 || r.Status != journal.RunBlocked {
			t.Errorf("run %s: %s with %d invocations (%v), want blocked with 2", r.ID, r.Status, len(invs), err)
		}
	}
	journaltest.CheckAndClose(t, j)
}

func setSchemaVersion(t *testing.T, path string, v uint64) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("version"), binary.BigEndian.AppendUint64(nil, v))
	}); err != nil {
		t.Fatal(err)
	}
}

// A schema-2 journal (before the log) is read as it is by a read-only
// open, and migrated by the first read-write one.
func TestSchema2JournalOpens(t *testing.T) {
	path := smallJournal(t)
	os.Remove(path + "-wal")
	setSchemaVersion(t, path, 2)
	before := readFile(t, path)
	j := journaltest.OpenPath(t, path, &journal.Options{ReadOnly: true})
	if runs, err := j.Runs(journal.RunFilter{}); err != nil || len(runs) != 3 {
		t.Fatalf("read-only: %d runs, %v", len(runs), err)
	}
	journaltest.CheckAndClose(t, j)
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("a read-only open of a schema-2 journal wrote")
	}
	j = journaltest.OpenPath(t, path, nil)
	newRun(t, j)
	journaltest.CheckAndClose(t, j)
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := smallJournal(t)
	setSchemaVersion(t, path, 99)
	refused(t, path, journal.ErrNewerSchema)
}

// A schema older than any migration knows is refused, unchanged: the
// migration runs in a transaction that fails as a whole.
func TestOpenOlderSchemaWithoutMigration(t *testing.T) {
	path := smallJournal(t)
	setSchemaVersion(t, path, 0)
	before := readFile(t, path)
	for _, ro := range []bool{false, true} {
		j, err := bolt.Open(path, &journal.Options{ReadOnly: ro})
		if err == nil {
			j.Close()
			t.Fatalf("ReadOnly=%v: opened a schema-0 journal", ro)
		}
		if !strings.Contains(err.Error(), "schema 0") {
			t.Errorf("ReadOnly=%v: %v", ro, err)
		}
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("file modified")
	}
}

func TestOpenValidJournalWritesNothing(t *testing.T) {
	path := smallJournal(t)
	before := readFile(t, path)
	st, _ := os.Stat(path)
	j := journaltest.OpenPath(t, path, nil)
	if runs, err := j.Runs(journal.RunFilter{}); err != nil || len(runs) != 3 {
		t.Fatalf("runs: %d, %v", len(runs), err)
	}
	journaltest.CheckAndClose(t, j)
	st2, _ := os.Stat(path)
	if !bytes.Equal(before, readFile(t, path)) || !st.ModTime().Equal(st2.ModTime()) {
		t.Error("opening and reading a journal modified the file")
	}
}

func TestOpenCreatesPrivateFileAndDirectory(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "a", "b", "journal.db")
	j := journaltest.OpenPath(t, path, nil)
	newRun(t, j)
	for p, want := range map[string]fs.FileMode{path: 0o600, path + "-wal": 0o600, filepath.Dir(path): 0o700 | fs.ModeDir, filepath.Join(base, "a"): 0o700 | fs.ModeDir} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode(), want)
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 2 || ents[0].Name() != "journal.db" || ents[1].Name() != "journal.db-wal" {
		t.Errorf("directory holds %v, want only journal.db and its log (no temporary files)", ents)
	}
}

func TestSecondProcessGetsErrLocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.db")
	c := startChild(t, "lock", path)
	c.waitFor(t, "ready")
	const timeout = 300 * time.Millisecond
	for _, ro := range []bool{false, true} {
		start := time.Now()
		j, err := bolt.Open(path, &journal.Options{LockTimeout: timeout, ReadOnly: ro})
		took := time.Since(start)
		if err == nil {
			j.Close()
			t.Fatalf("ReadOnly=%v: opened a journal another process holds", ro)
		}
		if !errors.Is(err, journal.ErrLocked) {
			t.Errorf("ReadOnly=%v: %v, want ErrLocked", ro, err)
		}
		if took < timeout-100*time.Millisecond || took > timeout+2*time.Second { // bbolt polls every 50 ms
			t.Errorf("ReadOnly=%v: ErrLocked after %v, want about %v", ro, took, timeout)
		}
	}
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	j := journaltest.OpenPath(t, path, &journal.Options{LockTimeout: timeout})
	newRun(t, j)
}

func TestSameProcessSecondOpenGetsErrLocked(t *testing.T) {
	j := journaltest.Open(t, nil)
	_, err := bolt.Open(j.Path(), &journal.Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

func TestClosedJournal(t *testing.T) {
	j := journaltest.Open(t, nil)
	run := newRun(t, j)
	journaltest.CheckAndClose(t, j)
	if err := j.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := j.SetRunStatus(run, journal.RunFailed, nil); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
	if _, err := j.Run(run); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
}
