package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Check verifies that the file is intact, that records and indexes agree
// exactly and that every invariant holds:
//
//   - the file's page structure (read with plain reads first, so that
//     damage is reported rather than crashing the process), then bbolt's
//     own consistency check;
//   - every record decodes, is stored under its own id, and appears in
//     each index; every index has exactly one entry per record;
//   - every invocation that is not skipped has an intent (attempt 1), its
//     attempts are numbered 1..n, only the last may be open, and a settled
//     state has no open attempt; resolutions go from a state that waits for
//     one to completed, failed or retry_approved;
//   - every invocation's run exists; a run is finished exactly when it has
//     FinishedAt; a succeeded run has no unsettled invocation;
//   - a run has at most one approval per step, each pending, approved or
//     rejected; a decided one says who and when (not before it was
//     requested, or, decided in advance, not after the run reached it), a
//     pending one says neither; a succeeded run has no pending approval.
//
// It returns nil, nil for a healthy journal. It first waits until the file
// holds every write that returned; while it runs, the file takes no new
// ones (writes go on into the log). Once it found a problem, the journal
// refuses writes.
func (j *Store) Check() (probs []journal.Problem, err error) {
	add := func(rec, format string, args ...any) {
		probs = append(probs, journal.Problem{Record: rec, Message: fmt.Sprintf(format, args...)})
	}
	defer func() {
		if len(probs) > 0 { // no write may build on what was found
			j.latch(fmt.Errorf("%w: %s", journal.ErrDamaged, probs[0]))
		}
	}()
	if err := j.caughtUp(); err != nil {
		return nil, err
	}
	tx, err := j.db.Begin(!j.readOnly) // a write transaction keeps the applier out
	if err != nil {
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			err = journal.ErrClosed
		}
		return nil, err
	}
	defer tx.Rollback()
	if err := walkFile(j.path, j.db.Info().PageSize, true); err != nil {
		add("file", "%v", err)
		return probs, nil // going on could crash on the damage
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			add("file", "%v", r)
		}
	}()
	for err := range tx.Check() {
		add("file", "%v", err)
	}
	if len(probs) == 0 {
		checkRecords(tx, add)
	}
	return probs, nil
}

func checkRecords(tx *bbolt.Tx, add func(rec, format string, args ...any)) {
	for _, name := range allBuckets {
		if tx.Bucket(name) == nil {
			add("file", "bucket %s missing", name)
			return
		}
	}
	type runInfo struct {
		status    journal.RunStatus
		unsettled *journal.Invocation
	}
	runs := map[journal.ID]*runInfo{}
	nRuns := 0
	_ = tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
		nRuns++
		r, err := journal.DecodeRun(sealerOf(tx), v)
		if err != nil {
			add(fmt.Sprintf("run %x", k), "%v", err)
			return nil
		}
		name := "run " + r.ID.String()
		if !bytes.Equal(k, r.ID.Bytes()) {
			add(name, "stored under key %x", k)
		}
		if tx.Bucket(bucketRunStatus).Get(runStatusKey(r.Status, r.ID)) == nil {
			add(name, "missing from the status index")
		}
		journal.CheckRun(r, add)
		runs[r.ID] = &runInfo{status: r.Status}
		return nil
	})
	checkIndexCount(tx, bucketRunStatus, nRuns, bucketRuns, add, func(k []byte, r *journal.Run) bool {
		return bytes.Equal(k, runStatusKey(r.Status, r.ID))
	}, nil)

	indexed := make([]int, len(invIndexes)) // entries each index should have
	legacy := 0                             // state entries of completed invocations
	_ = tx.Bucket(bucketInvs).ForEach(func(k, v []byte) error {
		inv, err := journal.DecodeInvocation(sealerOf(tx), v)
		if err != nil {
			add(fmt.Sprintf("invocation %x", k), "%v", err)
			for i, idx := range invIndexes {
				if !idx.partial {
					indexed[i]++ // its entries are there; its state is unknown
				}
			}
			return nil
		}
		name := "invocation " + inv.ID.String()
		if !bytes.Equal(k, inv.ID.Bytes()) {
			add(name, "stored under key %x", k)
		}
		for i, idx := range invIndexes {
			if key := idx.key(inv); key == nil {
				if tx.Bucket(idx.bucket).Get(stateKey(inv.State, inv.ID)) != nil {
					legacy++ // written before completed left the index
				}
			} else if tx.Bucket(idx.bucket).Get(key) == nil {
				add(name, "missing from the %s index", idx.name)
			} else {
				indexed[i]++
			}
		}
		journal.CheckInvocation(inv, name, add)
		if r := runs[inv.RunID]; r == nil {
			add(name, "belongs to missing run %s", inv.RunID)
		} else if inv.State.Unsettled() && r.unsettled == nil {
			r.unsettled = inv
		}
		return nil
	})
	for i, idx := range invIndexes {
		want := indexed[i]
		if idx.partial {
			want += legacy
		}
		checkIndexCount(tx, idx.bucket, want, bucketInvs, add, nil, func(k []byte, inv *journal.Invocation) bool {
			return bytes.Equal(k, idx.key(inv)) || (idx.partial && bytes.Equal(k, stateKey(inv.State, inv.ID)))
		})
	}
	for id, r := range runs {
		journal.CheckSucceeded(id, r.status, r.unsettled, add)
	}
}

var invIndexes = []struct {
	name   string
	bucket []byte
	key    func(*journal.Invocation) []byte // nil: not in the index
	// partial: the state index, which lists only some states (see
	// indexed), and may hold a legacy entry for the others.
	partial bool
}{
	{"run", bucketByRun, func(inv *journal.Invocation) []byte { return cat(inv.RunID.Bytes(), inv.ID.Bytes()) }, false},
	{"state", bucketByState, func(inv *journal.Invocation) []byte {
		if !indexed(inv.State) {
			return nil
		}
		return stateKey(inv.State, inv.ID)
	}, true},
	{"server/tool", bucketByTool, func(inv *journal.Invocation) []byte { return toolKey(inv.Server, inv.Tool, inv.ID) }, false},
}

// checkIndexCount compares an index's size with its records'. Every record
// was found under its expected key, so equal counts mean an exact match;
// only when they differ does it look for the stray entries.
func checkIndexCount(tx *bbolt.Tx, idx []byte, want int, records []byte, add func(string, string, ...any),
	runKey func([]byte, *journal.Run) bool, invKey func([]byte, *journal.Invocation) bool) {
	if n := tx.Bucket(idx).Stats().KeyN; n == want {
		return
	}
	_ = tx.Bucket(idx).ForEach(func(k, _ []byte) error {
		ok := false
		if len(k) >= 16 {
			if v := tx.Bucket(records).Get(k[len(k)-16:]); v != nil {
				if runKey != nil {
					r, err := journal.DecodeRun(sealerOf(tx), v)
					ok = err == nil && runKey(k, r)
				} else {
					inv, err := journal.DecodeInvocation(sealerOf(tx), v)
					ok = err == nil && invKey(k, inv)
				}
			}
		}
		if !ok {
			add(string(idx), "stray entry %x", k)
		}
		return nil
	})
}
