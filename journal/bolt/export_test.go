package bolt

// Hooks for the tests in package journal_test, which cannot be in package
// journal because they use journaltest (which imports journal).

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
)

// Commits is how many transactions the group committer has committed.
func (j *Store) Commits() int64 { return j.Stats().Commits }

// RawInvocation and RawRun return a record's stored bytes.
func (j *Store) RawInvocation(id journal.ID) []byte { return j.raw(bucketInvs, id) }
func (j *Store) RawRun(id journal.ID) []byte        { return j.raw(bucketRuns, id) }

func (j *Store) raw(bucket []byte, id journal.ID) (out []byte) {
	_ = j.view(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bucket).Get(id.Bytes()); v != nil {
			out = append([]byte{}, v...)
		}
		return nil
	})
	return out
}

// PutStrayStateKey writes (or, with remove, deletes) a state index entry
// for id that no record backs.
func (j *Store) PutStrayStateKey(s journal.State, id journal.ID, remove bool) error {
	return j.direct(func(tx *bbolt.Tx) error {
		if remove {
			return tx.Bucket(bucketByState).Delete(stateKey(s, id))
		}
		return tx.Bucket(bucketByState).Put(stateKey(s, id), nil)
	})
}

// BuildFixture fills the journal file at path (which must not exist) with
// runs×perRun completed invocations, with raw bbolt puts in key order and
// large transactions, without fsync: a benchmark fixture, not a journal
// write path. It returns the newest invocation id.
func BuildFixture(path string, runs, perRun int) (journal.ID, error) {
	if err := create(path); err != nil {
		return journal.ID{}, err
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		return journal.ID{}, err
	}
	defer db.Close()
	var g journal.IDGen
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	servers := []string{"fs", "git", "http", "db"}
	var last journal.ID
	for r := 0; r < runs; {
		err := db.Update(func(tx *bbolt.Tx) error {
			for _, name := range allBuckets {
				tx.Bucket(name).FillPercent = 1.0 // keys arrive in order
			}
			for end := min(r+20000/max(perRun, 1)+1, runs); r < end; r++ {
				now := t0.Add(time.Duration(r) * time.Second)
				fin := now.Add(time.Second)
				run := &journal.Run{ID: g.Next(now), Workflow: "bench", Status: journal.RunSucceeded, StartedAt: now, UpdatedAt: fin, FinishedAt: &fin}
				if err := putRun(tx, nil, run); err != nil {
					return err
				}
				for i := 0; i < perRun; i++ {
					at := now.Add(time.Duration(i) * time.Millisecond)
					end := at.Add(time.Millisecond)
					inv := &journal.Invocation{
						ID: g.Next(at), RunID: run.ID, Step: fmt.Sprintf("step%d", i), Item: -1,
						Server: servers[i%len(servers)], Tool: "tool", Arguments: json.RawMessage(`{"path":"/tmp/x","n":1}`),
						Trust: journal.Trust{Server: true, Workspace: true, WorkspaceSource: "store"}, State: journal.StateCompleted,
						Attempts:  []journal.Attempt{{N: 1, SentAt: at, EndedAt: &end}},
						Result:    &journal.Result{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`)},
						CreatedAt: at, UpdatedAt: end,
					}
					inv.IdempotencyKey = inv.ID.String()
					if err := putInv(tx, nil, inv); err != nil {
						return err
					}
					last = inv.ID
				}
			}
			return nil
		})
		if err != nil {
			return journal.ID{}, err
		}
	}
	return last, db.Sync()
}

// PutRunUnchecked rewrites an existing run as r, with none of the write
// methods' checks: a way for tests to store what Check must find.
func (j *Store) PutRunUnchecked(r *journal.Run) error {
	return j.direct(func(tx *bbolt.Tx) error {
		old, err := getRun(tx, r.ID)
		if err != nil {
			return err
		}
		return putRun(tx, old, r)
	})
}

// HoldApplier keeps the log's entries out of the file until someone waits
// for them (a query, Close) or Crash.
func (j *Store) HoldApplier() {
	j.ap.mu.Lock()
	j.ap.idle = time.Hour
	j.ap.mu.Unlock()
}

// Crash leaves the files as a process killed now would: what the log holds
// and the applier has not committed stays out of the file. It returns how
// many log entries that is.
func (j *Store) Crash() int {
	j.ap.mu.Lock()
	n := len(j.ap.queue)
	j.ap.queue, j.ap.bytes, j.ap.stop = nil, 0, true
	j.ap.mu.Unlock()
	signal(j.ap.urgent)
	<-j.ap.done
	j.closeOnce.Do(func() {
		j.log.close()
		sealers.Delete(j.db)
		j.db.Close()
		j.ov.clear()
		j.closeErr = journal.ErrClosed
	})
	return n
}

// LogEntries returns the offset of each entry of the journal's log, in
// order, as a reader of the log finds them.
func LogEntries(path string) ([]int64, error) {
	data, err := os.ReadFile(walPath(path))
	if err != nil {
		return nil, err
	}
	var offs []int64
	var last uint64
	for off := 0; ; {
		seq, _, p, ok := walEntryAt(data, off)
		if !ok || (off > 0 && seq != last+1) {
			return offs, nil
		}
		offs = append(offs, int64(off))
		last, off = seq, walNext(off, len(p))
	}
}

// FailApplies makes every commit of the log into the file fail with err
// (nil: succeed again).
func (j *Store) FailApplies(err error) {
	j.ap.mu.Lock()
	j.ap.fail = err
	j.ap.mu.Unlock()
	signal(j.ap.urgent)
}
