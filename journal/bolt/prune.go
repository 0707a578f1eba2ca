package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/internal/atomicfile"
	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
)

// pruneBatch is how many runs Prune removes per transaction.
const pruneBatch = 200

// Prune removes the runs that finished (succeeded, failed, blocked or
// cancelled) before before, with their invocations and all their index
// entries. It never removes a running run, nor a run with an invocation
// that may have had an effect nobody has accounted for yet (intent,
// outcome_unknown, retry_approved, or an unresolved aborted or timed_out
// call), nor a run with a step that waits for approval; those that are old
// enough are listed in Kept with the reason. With dryRun it only reports.
//
// Runs are removed in batches of up to pruneBatch, each batch in one
// transaction, committed and fsynced before the next: a crash in the middle
// leaves some runs removed and the others whole, never a run in part. The
// file does not shrink; see [Compact].
func (j *Store) Prune(before time.Time, dryRun bool) (journal.PruneReport, error) {
	var rep journal.PruneReport
	after := []byte{} // runs are scanned in id order from after
	for after != nil {
		var chunk journal.PruneReport
		var next []byte
		fn := func(tx *bbolt.Tx) error {
			chunk, next = journal.PruneReport{}, nil
			var err error
			next, err = pruneChunk(tx, after, before, dryRun, &chunk)
			return err
		}
		var err error
		if dryRun {
			err = j.view(fn)
		} else {
			err = j.update(fn)
		}
		if err != nil {
			return rep, err
		}
		rep.Runs += chunk.Runs
		rep.Invocations += chunk.Invocations
		rep.Kept = append(rep.Kept, chunk.Kept...)
		after = next
	}
	return rep, nil
}

// pruneChunk removes up to pruneBatch runs, scanning from the run key after
// on, and returns the key to go on from (nil at the end).
func pruneChunk(tx *bbolt.Tx, after []byte, before time.Time, dryRun bool, rep *journal.PruneReport) ([]byte, error) {
	var gone []journal.ID
	var next []byte
	c := tx.Bucket(bucketRuns).Cursor()
	for k, v := c.Seek(after); k != nil; k, v = c.Next() {
		if len(gone) == pruneBatch {
			next = bytes.Clone(k)
			break
		}
		id := journal.ID(k)
		var r struct {
			Status     journal.RunStatus  `json:"status"`
			StartedAt  time.Time          `json:"started_at"`
			FinishedAt *time.Time         `json:"finished_at"`
			Approvals  []journal.Approval `json:"approvals"`
		}
		b, err := journal.StripChecksum("run "+id.String(), v)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("run %s: %w: %v", id, journal.ErrDamaged, err)
		}
		keep, old, err := journal.PruneVerdict(&journal.Run{Status: r.Status, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Approvals: r.Approvals}, before,
			func(match func(journal.State) bool) (*journal.Invocation, error) { return firstWhere(tx, id, match) })
		switch {
		case err != nil:
			return nil, err
		case keep != "":
			rep.Kept = append(rep.Kept, journal.KeptRun{ID: id, Reason: keep})
			continue
		case !old:
			continue
		}
		gone = append(gone, id)
	}
	for _, id := range gone {
		n, err := deleteRun(tx, id, dryRun)
		if err != nil {
			return nil, err
		}
		rep.Runs++
		rep.Invocations += n
	}
	return next, nil
}

// deleteRun removes a run, its invocations and their index entries, and
// returns how many invocations it had (and, with dryRun, only counts them).
func deleteRun(tx *bbolt.Tx, id journal.ID, dryRun bool) (int, error) {
	r, err := getRun(tx, id)
	if err != nil {
		return 0, err
	}
	var invs []*journal.Invocation
	c := tx.Bucket(bucketByRun).Cursor()
	for k, _ := c.Seek(id.Bytes()); k != nil && bytes.HasPrefix(k, id.Bytes()); k, _ = c.Next() {
		inv, err := getInv(tx, journal.ID(k[16:]))
		if err != nil {
			return 0, err
		}
		invs = append(invs, inv)
	}
	if dryRun {
		return len(invs), nil
	}
	for _, inv := range invs {
		for _, idx := range invIndexes {
			if err := tx.Bucket(idx.bucket).Delete(idx.key(inv)); err != nil {
				return 0, err
			}
		}
		if !indexed(inv.State) {
			// A journal written before the state index left completed
			// invocations out may still list this one there.
			if err := tx.Bucket(bucketByState).Delete(stateKey(inv.State, inv.ID)); err != nil {
				return 0, err
			}
		}
		if err := tx.Bucket(bucketInvs).Delete(inv.ID.Bytes()); err != nil {
			return 0, err
		}
	}
	if err := tx.Bucket(bucketRunStatus).Delete(runStatusKey(r.Status, id)); err != nil {
		return 0, err
	}
	return len(invs), tx.Bucket(bucketRuns).Delete(id.Bytes())
}

// Compact rewrites the journal at path into a fresh file without the space
// that pruned or rewritten records left free, and returns the file's size
// before and after. The journal must not be open anywhere: Compact holds
// its lock throughout and fails with ErrLocked when another process (or
// another Journal of this process) has it open. A journal that fails
// validation or Check is refused, untouched.
//
// The copy is made with bbolt's Compact into a temporary file in the same
// directory, its key counts are compared with the original's, and it
// replaces path with internal/atomicfile (fsync, rename, fsync the
// directory): a crash at any
// point leaves either the old file or the new one at path, never a mix. A
// process that waited for the lock notices the replacement and opens the
// new file. A journal reached through a symbolic link is compacted where
// the link points, and the link is kept. Temporary files that an earlier,
// killed compact left behind are removed.
func Compact(path string) (before, after int64, err error) {
	if _, err := os.Stat(path); err != nil {
		return 0, 0, fmt.Errorf("compact: %w", err)
	}
	// A symbolic link stays a link: the file it points to is replaced.
	if path, err = filepath.EvalSymlinks(path); err != nil {
		return 0, 0, fmt.Errorf("compact: %w", err)
	}
	j, err := open(path, &journal.Options{LockTimeout: 500 * time.Millisecond}, openFlags{keyOptional: true})
	if err != nil {
		return 0, 0, err
	}
	defer j.Close()
	// With the lock held no other compact is going: a temporary file left
	// beside the journal is what a killed compact left behind.
	removeLeftovers(path)
	probs, err := j.Check()
	if err != nil {
		return 0, 0, err
	}
	if len(probs) > 0 {
		return 0, 0, fmt.Errorf("compact %s: %w: %s (and %d more problems)", path, journal.ErrDamaged, probs[0], len(probs)-1)
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	err = atomicfile.Replace(path, 0o600, func(f *os.File) error {
		return compactInto(j.db, f.Name())
	})
	if err != nil {
		return 0, 0, fmt.Errorf("compact %s: %w", path, err)
	}
	nst, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	return st.Size(), nst.Size(), nil
}

// removeLeftovers removes the temporary files a killed Compact (or
// journal creation) left beside the journal at path.
func removeLeftovers(path string) {
	dir, base := filepath.Split(path)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name := e.Name()
		// Earlier releases named their temporary files .NAME.compact-* and
		// .NAME.new-*.
		if atomicfile.IsTempName(name, path) || strings.HasPrefix(name, "."+base+".compact-") || strings.HasPrefix(name, "."+base+".new-") {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// compactInto copies src into the new file tmp and checks that every
// bucket has as many keys as in src. The caller fsyncs tmp.
func compactInto(src *bbolt.DB, tmp string) error {
	dst, err := bbolt.Open(tmp, 0o600, &bbolt.Options{NoSync: true}) // fsynced once, below
	if err != nil {
		return err
	}
	err = bbolt.Compact(dst, src, 64<<20)
	if err == nil {
		err = src.View(func(stx *bbolt.Tx) error {
			return dst.View(func(dtx *bbolt.Tx) error {
				for _, name := range allBuckets {
					s, d := stx.Bucket(name).Stats().KeyN, dtx.Bucket(name)
					if d == nil || d.Stats().KeyN != s {
						return fmt.Errorf("copy of bucket %s is incomplete", name)
					}
				}
				return nil
			})
		})
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}
