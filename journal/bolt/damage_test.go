package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
)

// tamper rewrites one stored record of the closed journal at path, with
// plain bbolt, as a flipped bit on the disk would.
func tamper(t *testing.T, path string, bucket []byte, key []byte, fn func([]byte) []byte) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucket)
		return b.Put(key, fn(bytes.Clone(b.Get(key))))
	}); err != nil {
		t.Fatal(err)
	}
}

// damagedJournal has one run with two completed invocations; the result
// text of the second is changed on disk, its JSON still valid.
func damagedJournal(t *testing.T) (path string, run, good, bad journal.ID) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "journal.db")
	j, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &journal.Run{Workflow: "wf", Definition: []byte("name: wf\n")}
	if err := j.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	var ids []journal.ID
	for _, text := range []string{"kept", "paid 100 EUR"} {
		in, err := j.Begin(&journal.Invocation{RunID: r.ID, Step: "s", Item: -1, Server: "s", Tool: "t"})
		if err != nil {
			t.Fatal(err)
		}
		res := &journal.Result{Content: json.RawMessage(`[{"type":"text","text":"` + text + `"}]`)}
		if err := j.Finish(in, journal.Outcome{State: journal.StateCompleted, Result: res}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	j.Close()
	tamper(t, path, bucketInvs, ids[1].Bytes(), func(v []byte) []byte {
		return bytes.Replace(v, []byte("paid 100 EUR"), []byte("paid 900 EUR"), 1)
	})
	return path, r.ID, ids[0], ids[1]
}

// TestChangedRecordIsDamage: a record whose bytes changed on disk — here a
// result text, the JSON still valid — is found on every read, by Check, and
// then no write is accepted.
func TestChangedRecordIsDamage(t *testing.T) {
	path, run, good, bad := damagedJournal(t)
	j, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Invocation(good); err != nil {
		t.Errorf("the intact record: %v", err)
	}
	if _, err := j.Invocation(bad); !errors.Is(err, journal.ErrDamaged) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("the changed record: %v, want a checksum mismatch", err)
	}
	if _, err := j.Begin(&journal.Invocation{RunID: run, Step: "t", Item: -1, Server: "s", Tool: "t"}); !errors.Is(err, journal.ErrDamaged) || !strings.Contains(err.Error(), "writes refused") {
		t.Errorf("a write after damage was seen: %v, want it refused", err)
	}
	j.Close()
	j2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	probs, err := j2.Check()
	if err != nil || len(probs) == 0 || !strings.Contains(probs[0].String(), "checksum mismatch") {
		t.Errorf("Check = %v, %v; want the checksum mismatch", probs, err)
	}
	// Check found damage: this Journal refuses writes too.
	if err := j2.CreateRun(&journal.Run{Workflow: "w"}); !errors.Is(err, journal.ErrDamaged) {
		t.Errorf("a write after Check found damage: %v", err)
	}
}

// TestSalvageCopiesWhatIsReadable: salvage copies every readable record
// into a new journal that checks clean, reports the damaged one, and never
// writes the source.
func TestSalvageCopiesWhatIsReadable(t *testing.T) {
	path, _, good, bad := damagedJournal(t)
	before, _ := os.ReadFile(path)
	out := filepath.Join(t.TempDir(), "saved.db")
	rep, err := Salvage(path, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Runs != 1 || rep.Invocations != 1 || len(rep.Lost) != 1 || rep.Lost[0].Key != bad.String() || !strings.Contains(rep.Lost[0].Reason, "checksum mismatch") {
		t.Errorf("report %+v", rep)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("salvage wrote to the damaged journal")
	}
	j, err := Open(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if probs, err := j.Check(); err != nil || len(probs) > 0 {
		t.Errorf("the salvaged journal: %v %v", probs, err)
	}
	if inv, err := j.Invocation(good); err != nil || !strings.Contains(string(inv.Result.Content), "kept") {
		t.Errorf("the readable invocation: %+v %v", inv, err)
	}
	if _, err := Salvage(path, out, nil); err == nil {
		t.Error("salvage over an existing file")
	}
}

// TestMigrateToSealedRecords: a schema 1 journal (records without
// checksums) is migrated on its first read-write open.
func TestMigrateToSealedRecords(t *testing.T) {
	path, _, good, bad := damagedJournal(t)
	// The tampered record too: a schema 1 journal could not tell.
	makeSchema1(t, path)
	j, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, id := range []journal.ID{good, bad} {
		if _, err := j.Invocation(id); err != nil {
			t.Errorf("after migration: %v", err)
		}
	}
	if probs, err := j.Check(); err != nil || len(probs) > 0 {
		t.Errorf("after migration: %v %v", probs, err)
	}
}

// makeSchema1 turns the closed journal at path into a schema 1 journal:
// records without their checksum.
func makeSchema1(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketRuns, bucketInvs} {
			b := tx.Bucket(name)
			var keys [][]byte
			b.ForEach(func(k, v []byte) error { keys = append(keys, bytes.Clone(k)); return nil })
			for _, k := range keys {
				v := b.Get(k)
				if err := b.Put(k, bytes.Clone(v[:len(v)-4])); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bucketMeta).Put(keyVersion, binary.BigEndian.AppendUint64(nil, 1))
	})
	if err != nil {
		t.Fatal(err)
	}
}
