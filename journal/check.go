package journal

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Problem is one finding of Check.
type Problem struct {
	Record  string
	Message string
}

func (p Problem) String() string { return p.Record + ": " + p.Message }

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
//     requested), a pending one says neither; a succeeded run has no
//     pending approval.
//
// It returns nil, nil for a healthy journal. It first waits until the file
// holds every write that returned; while it runs, the file takes no new
// ones (writes go on into the log). Once it found a problem, the journal
// refuses writes.
func (j *Journal) Check() (probs []Problem, err error) {
	add := func(rec, format string, args ...any) {
		probs = append(probs, Problem{rec, fmt.Sprintf(format, args...)})
	}
	defer func() {
		if len(probs) > 0 { // no write may build on what was found
			j.latch(fmt.Errorf("%w: %s", ErrDamaged, probs[0]))
		}
	}()
	if err := j.caughtUp(); err != nil {
		return nil, err
	}
	tx, err := j.db.Begin(!j.readOnly) // a write transaction keeps the applier out
	if err != nil {
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			err = ErrClosed
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

func checkRecords(tx *bolt.Tx, add func(rec, format string, args ...any)) {
	for _, name := range allBuckets {
		if tx.Bucket(name) == nil {
			add("file", "bucket %s missing", name)
			return
		}
	}
	type runInfo struct {
		status    RunStatus
		unsettled *Invocation
	}
	runs := map[ID]*runInfo{}
	nRuns := 0
	_ = tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
		nRuns++
		r, err := decodeRun(sealerOf(tx), v)
		if err != nil {
			add(fmt.Sprintf("run %x", k), "%v", err)
			return nil
		}
		name := "run " + r.ID.String()
		if !bytes.Equal(k, r.ID.key()) {
			add(name, "stored under key %x", k)
		}
		if tx.Bucket(bucketRunStatus).Get(runStatusKey(r.Status, r.ID)) == nil {
			add(name, "missing from the status index")
		}
		checkRun(r, add)
		runs[r.ID] = &runInfo{status: r.Status}
		return nil
	})
	checkIndexCount(tx, bucketRunStatus, nRuns, bucketRuns, add, func(k []byte, r *Run) bool {
		return bytes.Equal(k, runStatusKey(r.Status, r.ID))
	}, nil)

	indexed := make([]int, len(invIndexes)) // entries each index should have
	legacy := 0                             // state entries of completed invocations
	_ = tx.Bucket(bucketInvs).ForEach(func(k, v []byte) error {
		inv, err := decodeInv(sealerOf(tx), v)
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
		if !bytes.Equal(k, inv.ID.key()) {
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
		checkInvocation(inv, name, add)
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
		checkIndexCount(tx, idx.bucket, want, bucketInvs, add, nil, func(k []byte, inv *Invocation) bool {
			return bytes.Equal(k, idx.key(inv)) || (idx.partial && bytes.Equal(k, stateKey(inv.State, inv.ID)))
		})
	}
	for id, r := range runs {
		checkSucceeded(id, r.status, r.unsettled, add)
	}
}

var invIndexes = []struct {
	name   string
	bucket []byte
	key    func(*Invocation) []byte // nil: not in the index
	// partial: the state index, which lists only some states (see
	// State.indexed), and may hold a legacy entry for the others.
	partial bool
}{
	{"run", bucketByRun, func(inv *Invocation) []byte { return cat(inv.RunID.key(), inv.ID.key()) }, false},
	{"state", bucketByState, func(inv *Invocation) []byte {
		if !inv.State.indexed() {
			return nil
		}
		return stateKey(inv.State, inv.ID)
	}, true},
	{"server/tool", bucketByTool, func(inv *Invocation) []byte { return toolKey(inv.Server, inv.Tool, inv.ID) }, false},
}

// checkIndexCount compares an index's size with its records'. Every record
// was found under its expected key, so equal counts mean an exact match;
// only when they differ does it look for the stray entries.
func checkIndexCount(tx *bolt.Tx, idx []byte, want int, records []byte, add func(string, string, ...any),
	runKey func([]byte, *Run) bool, invKey func([]byte, *Invocation) bool) {
	if n := tx.Bucket(idx).Stats().KeyN; n == want {
		return
	}
	_ = tx.Bucket(idx).ForEach(func(k, _ []byte) error {
		ok := false
		if len(k) >= 16 {
			if v := tx.Bucket(records).Get(k[len(k)-16:]); v != nil {
				if runKey != nil {
					r, err := decodeRun(sealerOf(tx), v)
					ok = err == nil && runKey(k, r)
				} else {
					inv, err := decodeInv(sealerOf(tx), v)
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

// The rules of the records themselves, which Check (on either backend)
// and Import apply: checkRun to a run record, checkInvocation to an
// invocation record, checkSucceeded to a run and its invocations.

// checkRun adds the problems of a run record: a run is finished exactly
// when it has FinishedAt, its digest is its definition's, and its
// approvals are consistent (checkApprovals).
func checkRun(r *Run, add func(string, string, ...any)) {
	name := "run " + r.ID.String()
	if r.Status.Finished() != (r.FinishedAt != nil) {
		add(name, "status %s but finished_at %v", r.Status, r.FinishedAt)
	}
	if len(r.Definition) > 0 && r.Digest != Digest(r.Definition) {
		add(name, "digest %s does not match the definition", r.Digest)
	}
	checkApprovals(r, name, add)
}

// checkSucceeded adds the problem of a succeeded run with an unsettled
// invocation ([State.Unsettled]): unsettled is the first one found of the
// run's invocations, nil when there is none.
func checkSucceeded(run ID, status RunStatus, unsettled *Invocation, add func(string, string, ...any)) {
	if status == RunSucceeded && unsettled != nil {
		add("run "+run.String(), "succeeded while invocation %s is %s", unsettled.ID, unsettled.State)
	}
}

// checkInvocation adds the problems of an invocation record: its
// idempotency key is its id; it has an intent (attempt 1) unless skipped,
// its attempts are numbered 1..n, only the last may be open, and a settled
// state has no open attempt; resolutions go from a state that waits for
// one to completed, failed or retry_approved.
func checkInvocation(inv *Invocation, name string, add func(string, string, ...any)) {
	if inv.IdempotencyKey != inv.ID.String() {
		add(name, "idempotency key %q is not the invocation id", inv.IdempotencyKey)
	}
	switch {
	case inv.State == StateSkipped && len(inv.Attempts) > 0:
		add(name, "skipped but has %d attempts", len(inv.Attempts))
	case inv.State != StateSkipped && len(inv.Attempts) == 0:
		add(name, "state %s without an intent (no attempts)", inv.State)
	}
	for i, a := range inv.Attempts {
		if a.N != i+1 {
			add(name, "attempt %d numbered %d", i+1, a.N)
		}
		if i < len(inv.Attempts)-1 && a.EndedAt == nil {
			add(name, "attempt %d has no outcome but a later attempt exists", a.N)
		}
	}
	if last := inv.LastAttempt(); inv.State != StateIntent && last != nil && last.EndedAt == nil {
		add(name, "state %s but the last attempt has no outcome", inv.State)
	}
	for i, r := range inv.Resolutions {
		if !resolvable(r.From, r.As) || !r.As.isResolution() {
			add(name, "resolution %d from %s as %s", i+1, r.From, r.As)
		}
	}
	if inv.State == StateRetryApproved && len(inv.Resolutions) == 0 {
		add(name, "retry_approved without a resolution")
	}
}

func checkApprovals(r *Run, name string, add func(string, string, ...any)) {
	seen := map[string]bool{}
	for i, a := range r.Approvals {
		what := fmt.Sprintf("approval %d (step %q)", i+1, a.Step)
		switch {
		case a.Step == "":
			add(name, "approval %d has no step", i+1)
		case seen[a.Step]:
			add(name, "%s: a second approval of the same step", what)
		}
		seen[a.Step] = true
		switch {
		case a.State == ApprovalPending:
			if a.By != "" || a.At != nil {
				add(name, "%s: pending but decided by %q", what, a.By)
			}
			if r.Status == RunSucceeded {
				add(name, "%s: succeeded while the step waits for approval", what)
			}
		case a.State.Decided():
			if a.By == "" || a.At == nil || a.At.Before(a.RequestedAt) {
				add(name, "%s: %s without who, or when not after it was requested", what, a.State)
			}
		default:
			add(name, "%s: state %s", what, a.State)
		}
	}
}
