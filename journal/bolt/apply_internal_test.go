package bolt

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
)

// TestCoalescedApplyEqualsSequential: applying a batch of log entries
// (each record once, its last version) leaves the buckets exactly as
// applying every record in order does — across entries, over records
// already in the file, and with a run and an invocation sharing an id.
func TestCoalescedApplyEqualsSequential(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := range 100 {
		// versions makes the next version of each record as the writes do:
		// its old state is the one the previous version put.
		type history struct {
			kind   byte
			id     journal.ID
			state  byte
			exists bool
		}
		run := journal.NewID()
		var records []*history
		for _, id := range []journal.ID{run, journal.NewID(), journal.NewID()} {
			records = append(records, &history{kind: recRun, id: id}, &history{kind: recInv, id: id})
		}
		next := func(h *history, version int) *walRecord {
			n := byte(1 + rng.Intn(len(journal.States())))
			if h.kind == recRun {
				n = byte(1 + rng.Intn(len(journal.RunStatuses())))
			}
			r := &walRecord{kind: h.kind, isNew: !h.exists, new: n, id: h.id, run: run, server: "s", tool: "t",
				val: fmt.Appendf(nil, "%c %d %d", h.kind, n, version)}
			if h.exists {
				r.old = h.state
			}
			if h.kind == recRun {
				r.run = h.id
			}
			h.state, h.exists = n, true
			return r
		}
		var inFile, logged []*walRecord
		for _, h := range records {
			if rng.Intn(2) == 0 {
				inFile = append(inFile, next(h, 0))
			}
		}
		for v := 1; v < 12; v++ {
			logged = append(logged, next(records[rng.Intn(len(records))], v))
		}
		var entries []walEntry
		for i, seq := 0, uint64(1); i < len(logged); seq++ {
			n := min(1+rng.Intn(3), len(logged)-i)
			entries = append(entries, walEntry{seq: seq, recs: logged[i : i+n]})
			i += n
		}

		apply := func(name string, fn func(*bbolt.Tx) error) string {
			db, err := bbolt.Open(filepath.Join(t.TempDir(), name), 0o600, &bbolt.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.Update(func(tx *bbolt.Tx) error {
				if err := initialize(tx); err != nil {
					return err
				}
				for _, r := range inFile {
					if err := r.apply(tx); err != nil {
						return err
					}
				}
				return fn(tx)
			})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			db.View(func(tx *bbolt.Tx) error {
				for _, b := range allBuckets {
					tx.Bucket(b).ForEach(func(k, v []byte) error {
						if string(b) != string(bucketMeta) {
							fmt.Fprintf(&out, "%s %x=%x\n", b, k, v)
						}
						return nil
					})
				}
				return nil
			})
			return out.String()
		}
		sequential := apply("sequential", func(tx *bbolt.Tx) error {
			for _, r := range logged {
				if err := r.apply(tx); err != nil {
					return err
				}
			}
			return nil
		})
		coalesced := apply("coalesced", func(tx *bbolt.Tx) error { return applyEntries(tx, entries) })
		if sequential != coalesced {
			t.Fatalf("round %d: record by record:\n%s\ncoalesced:\n%s", round, sequential, coalesced)
		}
	}
}

// TestOverlayIndexOfRuns: the overlay's index of a run's invocations
// follows its records, also when a later record of another kind takes an
// invocation's id (an import can do that).
func TestOverlayIndexOfRuns(t *testing.T) {
	var o overlay
	run, a, b := journal.NewID(), journal.NewID(), journal.NewID()
	o.add(walEntry{seq: 1, recs: []*walRecord{{kind: recInv, id: a, run: run, isNew: true}, {kind: recInv, id: b, run: run, isNew: true}}})
	if got := len(o.newInvs(run)); got != 2 {
		t.Fatalf("newInvs: %d ids, want 2", got)
	}
	o.add(walEntry{seq: 2, recs: []*walRecord{{kind: recRun, id: b, run: b, isNew: true}}})
	if got := o.newInvs(run); len(got) != 1 || got[0] != a {
		t.Errorf("after a run took invocation b's id: newInvs %v, want [%v]", got, a)
	}
	o.drop(1)
	if len(o.newInvs(run)) != 0 || len(o.runs) != 0 {
		t.Errorf("after the drop of entry 1: newInvs %v, index %v", o.newInvs(run), o.runs)
	}
	o.drop(2)
	if len(o.recs) != 0 || len(o.runs) != 0 {
		t.Errorf("after the drop of everything: %d records, index %v", len(o.recs), o.runs)
	}
}
