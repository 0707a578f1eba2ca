package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Run returns the run with the given id.
func (j *Journal) Run(id ID) (*Run, error) {
	var r *Run
	err := j.db.View(func(tx *bolt.Tx) (err error) {
		r, err = getRun(tx, id)
		return err
	})
	return r, err
}

// Invocation returns the invocation with the given id.
func (j *Journal) Invocation(id ID) (*Invocation, error) {
	var inv *Invocation
	err := j.db.View(func(tx *bolt.Tx) (err error) {
		inv, err = getInv(tx, id)
		return err
	})
	return inv, err
}

// FindRun resolves a full id or a unique prefix of one to a run id.
func (j *Journal) FindRun(prefix string) (ID, error) { return j.find(bucketRuns, "run", prefix) }

// FindInvocation resolves a full id or a unique prefix of one to an invocation id.
func (j *Journal) FindInvocation(prefix string) (ID, error) {
	return j.find(bucketInvs, "invocation", prefix)
}

func (j *Journal) find(bucket []byte, what, prefix string) (ID, error) {
	whole, half, hasHalf, err := prefixBytes(prefix)
	if err != nil {
		return ID{}, err
	}
	var found []ID
	err = j.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, _ := c.Seek(whole); k != nil && bytes.HasPrefix(k, whole); k, _ = c.Next() {
			if hasHalf && (len(k) <= len(whole) || k[len(whole)]&0xf0 != half) {
				continue
			}
			found = append(found, ID(k))
			if len(found) > 1 {
				return nil
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return ID{}, err
	case len(found) == 0:
		return ID{}, fmt.Errorf("%s %q: %w", what, prefix, ErrNotFound)
	case len(found) > 1:
		return ID{}, fmt.Errorf("%s %q matches several: %w; type more of the id", what, prefix, ErrAmbiguous)
	}
	return found[0], nil
}

// Filter selects invocations. Zero fields match everything.
type Filter struct {
	Run    ID
	State  State
	Server string
	Tool   string
	Since  time.Time // created at or after
	Until  time.Time // created before
	// Before is a cursor: only invocations older than this id (newest-first
	// listing) are returned. Use the last id of a page to get the next.
	Before ID
	// Limit caps the number returned; 0 means no limit.
	Limit int
}

func (f *Filter) match(inv *Invocation) bool {
	return (f.Run.IsZero() || inv.RunID == f.Run) &&
		(f.State == stateInvalid || inv.State == f.State) &&
		(f.Server == "" || inv.Server == f.Server) &&
		(f.Tool == "" || inv.Tool == f.Tool) &&
		(f.Since.IsZero() || !inv.CreatedAt.Before(f.Since)) &&
		(f.Until.IsZero() || inv.CreatedAt.Before(f.Until))
}

// Invocations lists invocations matching f, newest first. It walks the most
// selective index for f, so listing by run, state or server/tool does not
// scan the whole journal.
func (j *Journal) Invocations(f Filter) ([]Invocation, error) {
	var out []Invocation
	err := j.db.View(func(tx *bolt.Tx) error {
		invs := tx.Bucket(bucketInvs)
		var prefix []byte
		var b *bolt.Bucket
		switch {
		case !f.Run.IsZero():
			b, prefix = tx.Bucket(bucketByRun), f.Run.key()
		case f.State != stateInvalid:
			b, prefix = tx.Bucket(bucketByState), []byte{byte(f.State)}
		case f.Server != "" && f.Tool != "":
			b, prefix = tx.Bucket(bucketByTool), cat([]byte(f.Server), []byte{0}, []byte(f.Tool), []byte{0})
		default:
			b = invs
		}
		c := b.Cursor()
		k := lastWithPrefix(c, prefix, f.Before)
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			id := k[len(k)-16:]
			if !f.Before.IsZero() && bytes.Compare(id, f.Before.key()) >= 0 {
				continue
			}
			v := invs.Get(id)
			if v == nil {
				return fmt.Errorf("index entry for %x without a record: %w", id, ErrDamaged)
			}
			inv, err := decodeInv(v)
			if err != nil {
				return err
			}
			if !f.Since.IsZero() && inv.CreatedAt.Before(f.Since) && b == invs {
				break // ids are time-ordered: nothing older can match
			}
			if f.match(inv) {
				out = append(out, *inv)
				if f.Limit > 0 && len(out) >= f.Limit {
					break
				}
			}
		}
		return nil
	})
	return out, err
}

// lastWithPrefix positions c on the last key with prefix (and, for the main
// bucket, before the cursor id).
func lastWithPrefix(c *bolt.Cursor, prefix []byte, before ID) []byte {
	if len(prefix) == 0 {
		if before.IsZero() {
			k, _ := c.Last()
			return k
		}
		k, _ := c.Seek(before.key())
		if k == nil {
			k, _ = c.Last()
			return k
		}
		k, _ = c.Prev()
		return k
	}
	end := append(bytes.Clone(prefix), 0xff)
	for i := 0; i < 16; i++ {
		end = append(end, 0xff)
	}
	k, _ := c.Seek(end)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	return k
}

// RunInvocations returns a run's invocations in the order they were created.
func (j *Journal) RunInvocations(run ID) ([]Invocation, error) {
	var out []Invocation
	err := j.db.View(func(tx *bolt.Tx) error {
		invs := tx.Bucket(bucketInvs)
		c := tx.Bucket(bucketByRun).Cursor()
		p := run.key()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			inv, err := decodeInv(invs.Get(k[16:]))
			if err != nil {
				return err
			}
			out = append(out, *inv)
		}
		return nil
	})
	return out, err
}

// RunFilter selects runs. Zero fields match everything.
type RunFilter struct {
	Status RunStatus
	Limit  int
}

// Runs lists runs matching f, newest first.
func (j *Journal) Runs(f RunFilter) ([]Run, error) {
	var out []Run
	err := j.db.View(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		var c *bolt.Cursor
		var prefix []byte
		if f.Status != runInvalid {
			c, prefix = tx.Bucket(bucketRunStatus).Cursor(), []byte{byte(f.Status)}
		} else {
			c = runs.Cursor()
		}
		for k := lastWithPrefix(c, prefix, ID{}); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			r, err := getRun(tx, ID(k[len(k)-16:]))
			if err != nil {
				return err
			}
			out = append(out, *r)
			if f.Limit > 0 && len(out) >= f.Limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// Export writes every invocation created at or after since as JSON Lines,
// oldest first, one record at a time (memory stays bounded by one record).
func (j *Journal) Export(w io.Writer, since time.Time) error {
	return j.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketInvs).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if !since.IsZero() {
				inv, err := decodeInv(v)
				if err != nil {
					return err
				}
				if inv.CreatedAt.Before(since) {
					continue
				}
			}
			if !json.Valid(v) {
				return fmt.Errorf("invocation %x: %w", k, ErrDamaged)
			}
			if _, err := w.Write(append(bytes.Clone(v), '\n')); err != nil {
				return err
			}
		}
		return nil
	})
}

// Problem is one finding of Check.
type Problem struct {
	Record  string
	Message string
}

func (p Problem) String() string { return p.Record + ": " + p.Message }

// Check verifies that the file is intact, that records and indexes agree and
// that every invariant holds. It returns nil, nil for a healthy journal.
func (j *Journal) Check() ([]Problem, error) {
	var probs []Problem
	add := func(rec, format string, args ...any) {
		probs = append(probs, Problem{rec, fmt.Sprintf(format, args...)})
	}
	err := j.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			add("file", "%v", err)
		}
		runs := map[ID]*Run{}
		if err := tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
			var r Run
			if err := json.Unmarshal(v, &r); err != nil {
				add("run "+fmt.Sprintf("%x", k), "undecodable: %v", err)
				return nil
			}
			if !bytes.Equal(k, r.ID.key()) {
				add("run "+r.ID.String(), "stored under key %x", k)
			}
			if tx.Bucket(bucketRunStatus).Get(runStatusKey(r.Status, r.ID)) == nil {
				add("run "+r.ID.String(), "missing from the status index")
			}
			runs[r.ID] = &r
			return nil
		}); err != nil {
			return err
		}
		count := 0
		unknown := map[ID]bool{}
		if err := tx.Bucket(bucketInvs).ForEach(func(k, v []byte) error {
			count++
			inv, err := decodeInv(v)
			if err != nil {
				add(fmt.Sprintf("invocation %x", k), "undecodable: %v", err)
				return nil
			}
			name := "invocation " + inv.ID.String()
			if !bytes.Equal(k, inv.ID.key()) {
				add(name, "stored under key %x", k)
			}
			if runs[inv.RunID] == nil {
				add(name, "belongs to missing run %s", inv.RunID)
			}
			if tx.Bucket(bucketByRun).Get(cat(inv.RunID.key(), inv.ID.key())) == nil {
				add(name, "missing from the run index")
			}
			if tx.Bucket(bucketByState).Get(stateKey(inv.State, inv.ID)) == nil {
				add(name, "missing from the state index")
			}
			if tx.Bucket(bucketByTool).Get(toolKey(inv.Server, inv.Tool, inv.ID)) == nil {
				add(name, "missing from the server/tool index")
			}
			if inv.State != StateSkipped && len(inv.Attempts) == 0 {
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
			if inv.State != StateIntent && inv.State != StateSkipped {
				if last := inv.LastAttempt(); last != nil && last.EndedAt == nil && len(inv.Resolutions) == 0 {
					add(name, "state %s but the last attempt has no outcome", inv.State)
				}
			}
			if inv.State == StateOutcomeUnknown {
				unknown[inv.RunID] = true
			}
			return nil
		}); err != nil {
			return err
		}
		for _, idx := range [][]byte{bucketByRun, bucketByState, bucketByTool} {
			n := 0
			_ = tx.Bucket(idx).ForEach(func(k, _ []byte) error {
				n++
				if len(k) < 16 || tx.Bucket(bucketInvs).Get(k[len(k)-16:]) == nil {
					add(string(idx), "entry %x points to no invocation", k)
				}
				return nil
			})
			if n != count {
				add(string(idx), "%d entries for %d invocations", n, count)
			}
		}
		for id, r := range runs {
			if r.Status == RunSucceeded && unknown[id] {
				add("run "+id.String(), "succeeded with an invocation whose outcome is unknown")
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrDamaged) {
		return probs, err
	}
	if err != nil {
		add("file", "%v", err)
	}
	return probs, nil
}
