package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
)

// Run returns the run with the given id.
func (j *Store) Run(id journal.ID) (*journal.Run, error) {
	if rec := j.ov.get(id); rec != nil && rec.kind == recRun {
		return journal.DecodeRun(j.sealer, rec.val)
	}
	var r *journal.Run
	err := j.viewNow(func(tx *bbolt.Tx) (err error) {
		r, err = getRun(tx, id)
		return err
	})
	return r, err
}

// Invocation returns the invocation with the given id.
func (j *Store) Invocation(id journal.ID) (*journal.Invocation, error) {
	if rec := j.ov.get(id); rec != nil && rec.kind == recInv {
		return journal.DecodeInvocation(j.sealer, rec.val)
	}
	var inv *journal.Invocation
	err := j.viewNow(func(tx *bbolt.Tx) (err error) {
		inv, err = getInv(tx, id)
		return err
	})
	return inv, err
}

// FindRun resolves a full id or a unique prefix of one to a run id. Dashes
// are ignored; an odd number of hex digits is fine.
func (j *Store) FindRun(prefix string) (journal.ID, error) {
	return j.find(bucketRuns, "run", prefix)
}

// FindInvocation resolves a full id or a unique prefix of one to an
// invocation id, like FindRun.
func (j *Store) FindInvocation(prefix string) (journal.ID, error) {
	return j.find(bucketInvs, "invocation", prefix)
}

func (j *Store) find(bucket []byte, what, prefix string) (journal.ID, error) {
	whole, half, hasHalf, err := journal.PrefixBytes(prefix)
	if err != nil {
		return journal.ID{}, err
	}
	if len(whole) == len(journal.ID{}) {
		// A whole id: the log's records, then the file's (one applied
		// meanwhile is there), without waiting for the log to be applied.
		id, kind := journal.ID(whole), recInv
		if bytes.Equal(bucket, bucketRuns) {
			kind = recRun
		}
		switch rec := j.ov.get(id); {
		case rec == nil:
			err := j.viewNow(func(tx *bbolt.Tx) error {
				if tx.Bucket(bucket).Get(whole) == nil {
					return fmt.Errorf("%s %q: %w", what, prefix, journal.ErrNotFound)
				}
				return nil
			})
			return id, err
		case rec.kind == kind:
			return id, nil
		}
		// A run and an invocation share the id (an import): the log
		// holds the latest of the two only. Read the file once the log
		// is in it, below.
	}
	start := whole
	if hasHalf {
		start = append(bytes.Clone(whole), half)
	}
	var found []journal.ID
	err = j.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, _ := c.Seek(start); k != nil && bytes.HasPrefix(k, whole) && len(found) <= journal.MaxCandidates; k, _ = c.Next() {
			if hasHalf && (len(k) <= len(whole) || k[len(whole)]&0xf0 != half) {
				break
			}
			found = append(found, journal.ID(k))
		}
		return nil
	})
	switch {
	case err != nil:
		return journal.ID{}, err
	case len(found) == 0:
		return journal.ID{}, fmt.Errorf("%s %q: %w", what, prefix, journal.ErrNotFound)
	case len(found) > 1:
		return journal.ID{}, journal.Ambiguous(what, prefix, found)
	}
	return found[0], nil
}

// Invocations lists invocations matching f, newest first. It walks the most
// selective index for f (run, then state, then server and tool), starting
// at the cursor, so a page costs what it returns plus the records the other
// filters reject; Since stops the walk at the first older id.
func (j *Store) Invocations(f journal.Filter) ([]journal.Invocation, error) {
	var out []journal.Invocation
	err := j.view(func(tx *bbolt.Tx) error {
		return walkInvs(tx, f, true, func(inv *journal.Invocation) bool {
			out = append(out, *inv)
			return f.Limit <= 0 || len(out) < f.Limit
		})
	})
	return out, err
}

// CountInvocations counts the invocations matching f (its Limit ignored),
// stopping at most: it returns most and true when there are more. A filter
// its index answers alone (run; state; server and tool; nothing) is counted
// from index keys without reading records.
func (j *Store) CountInvocations(f journal.Filter, most int) (n int, more bool, err error) {
	f.Limit = 0
	c := bounded{most: most}
	err = j.view(func(tx *bbolt.Tx) error {
		if f == (journal.Filter{State: journal.StateCompleted}) && most >= 0 {
			c = countCompleted(tx, most)
			return nil
		}
		return walkInvs(tx, f, false, func(*journal.Invocation) bool { return c.add() })
	})
	return c.n, c.more, err
}

// countCompleted counts the completed invocations, up to most. The state
// index leaves them out (they are most of a journal), so walking their
// records would read thousands of pages for a count of 10,000: they are
// every invocation (the run index, one small entry each) less those in
// another state (the state index, which lists those exactly; Check keeps
// the three in step). A journal written before may hold entries for
// completed invocations in the state index; they are not counted.
func countCompleted(tx *bbolt.Tx, most int) bounded {
	others := 0
	c := tx.Bucket(bucketByState).Cursor()
	for _, s := range journal.States() {
		if !indexed(s) {
			continue
		}
		p := []byte{byte(s)}
		for k, _ := c.Seek(p); k != nil && k[0] == byte(s); k, _ = c.Next() {
			others++
		}
	}
	all := 0
	c = tx.Bucket(bucketByRun).Cursor()
	for k, _ := c.First(); k != nil && all-others <= most; k, _ = c.Next() {
		all++
	}
	n := max(all-others, 0)
	if n > most {
		return bounded{n: most, most: most, more: true}
	}
	return bounded{n: n, most: most}
}

// bounded counts up to most.
type bounded struct {
	n, most int
	more    bool
}

// add counts one more; false once there are more than most.
func (c *bounded) add() bool {
	if c.n == c.most {
		c.more = true
		return false
	}
	c.n++
	return true
}

// walkInvs calls fn on each invocation matching f, newest first, until fn
// returns false. Unless records is set, fn may be given nil where the
// index alone says the invocation matches.
func walkInvs(tx *bbolt.Tx, f journal.Filter, records bool, fn func(*journal.Invocation) bool) error {
	invs := tx.Bucket(bucketInvs)
	b, prefix := invs, []byte(nil)
	// rest is f without what the index selects: when it is empty, every
	// key under the prefix matches and only the count is needed.
	rest := f
	rest.Before, rest.Since, rest.Limit = journal.ID{}, time.Time{}, 0
	switch {
	case !f.Run.IsZero():
		b, prefix = tx.Bucket(bucketByRun), f.Run.Bytes()
		rest.Run = journal.ID{}
	case indexed(f.State) && f.State.Valid():
		b, prefix = tx.Bucket(bucketByState), []byte{byte(f.State)}
		rest.State = 0 // any state
	case f.Server != "" && f.Tool != "":
		b, prefix = tx.Bucket(bucketByTool), toolPrefix(f.Server, f.Tool)
		rest.Server, rest.Tool = "", ""
	}
	keysOnly := !records && rest == (journal.Filter{}) && f.Since.IsZero()
	if keysOnly && prefix == nil && f.Before.IsZero() {
		// A count of every invocation: the run index has one small entry
		// for each, so its keys fill a few pages where the records' keys
		// sit among the records themselves, thousands of pages for a
		// count of 10,000 (Check keeps the two in step).
		b = tx.Bucket(bucketByRun)
	}
	c := b.Cursor()
	for k := seekLast(c, prefix, f.Before); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		id := journal.ID(k[len(k)-16:])
		if !f.Since.IsZero() && id.Millis() < f.Since.UnixMilli() {
			break // an id's time is never before its record's CreatedAt
		}
		if keysOnly {
			if !fn(nil) {
				return nil
			}
			continue
		}
		v := invs.Get(id.Bytes())
		if v == nil {
			return fmt.Errorf("index entry %x without a record: %w", k, journal.ErrDamaged)
		}
		inv, err := journal.DecodeInvocation(sealerOf(tx), v)
		if err != nil {
			return err
		}
		if f.Match(inv) && !fn(inv) {
			return nil
		}
	}
	return nil
}

// seekLast positions c on the last key that has prefix and, when before is
// set, ends in an id older than before.
func seekLast(c *bbolt.Cursor, prefix []byte, before journal.ID) []byte {
	end := append(bytes.Clone(prefix), before.Bytes()...)
	if before.IsZero() {
		end = append(bytes.Clone(prefix), bytes.Repeat([]byte{0xff}, 17)...)
	}
	k, _ := c.Seek(end)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	return k
}

// RunInvocations returns a run's invocations in the order they were
// created, without waiting for the log to be applied: the file's, each in
// its version from the log where the log holds a newer one, and those
// only the log holds yet. A run's end, its report and its page read them,
// and a read that waited would make the applier commit every time.
func (j *Store) RunInvocations(run journal.ID) ([]journal.Invocation, error) {
	// The log's records before the file's: one applied (and dropped)
	// meanwhile is in the file as read below.
	logged := j.ov.runInvs(run)
	var out []journal.Invocation
	err := j.viewNow(func(tx *bbolt.Tx) error {
		applied, _ := walState(tx)
		newer := func(id journal.ID) *walRecord {
			if r, ok := logged[id]; ok && r.seq > applied {
				return r.rec
			}
			return nil
		}
		c := tx.Bucket(bucketByRun).Cursor()
		p := run.Bytes()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			id := journal.ID(k[16:])
			if newer(id) != nil {
				continue // below
			}
			inv, err := getInv(tx, id)
			if err != nil {
				return err
			}
			out = append(out, *inv)
		}
		for id := range logged {
			r := newer(id)
			if r == nil {
				continue // in the file, read above
			}
			inv, err := journal.DecodeInvocation(j.sealer, r.val)
			if err != nil {
				return err
			}
			out = append(out, *inv)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b journal.Invocation) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out, err
}

// Runs lists runs matching f, newest first.
func (j *Store) Runs(f journal.RunFilter) ([]journal.Run, error) {
	var out []journal.Run
	err := j.view(func(tx *bbolt.Tx) error {
		return walkRuns(tx, f, true, func(r *journal.Run) bool {
			out = append(out, *r)
			return f.Limit <= 0 || len(out) < f.Limit
		})
	})
	return out, err
}

// CountRuns counts the runs matching f (its Limit ignored), stopping at
// most: it returns most and true when there are more.
func (j *Store) CountRuns(f journal.RunFilter, most int) (n int, more bool, err error) {
	f.Limit = 0
	c := bounded{most: most}
	err = j.view(func(tx *bbolt.Tx) error {
		return walkRuns(tx, f, false, func(*journal.Run) bool { return c.add() })
	})
	return c.n, c.more, err
}

// walkRuns calls fn on each run matching f, newest first, until fn returns
// false. Unless records is set, fn may be given nil where the keys alone
// say the run matches.
func walkRuns(tx *bbolt.Tx, f journal.RunFilter, records bool, fn func(*journal.Run) bool) error {
	c, prefix := tx.Bucket(bucketRuns).Cursor(), []byte(nil)
	if f.Status.Valid() {
		c, prefix = tx.Bucket(bucketRunStatus).Cursor(), []byte{byte(f.Status)}
	}
	keysOnly := !records && f.Workflow == "" && f.Since.IsZero()
	if keysOnly && prefix == nil && f.Before.IsZero() {
		// A count of every run: the status index has one small entry for
		// each, where the runs' keys sit among records that carry their
		// workflow's definition (Check keeps the two in step).
		c = tx.Bucket(bucketRunStatus).Cursor()
	}
	for k := seekLast(c, prefix, f.Before); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		if keysOnly {
			if !fn(nil) {
				return nil
			}
			continue
		}
		id := journal.ID(k[len(k)-16:])
		if !f.Since.IsZero() && id.Millis() < f.Since.UnixMilli()-runIDLead.Milliseconds() {
			break // a run's id is made when it starts (see runIDLead)
		}
		r, err := getRun(tx, id)
		if err != nil {
			return err
		}
		if (f.Workflow == "" || r.Workflow == f.Workflow) && (f.Since.IsZero() || !r.StartedAt.Before(f.Since)) && !fn(r) {
			return nil
		}
	}
	return nil
}

// runIDLead bounds how long before its StartedAt a run's id may be made
// (journal.Writer.NewRunID: the engine makes it, then queues the run's
// creation): a scan for runs started since a time goes on that much
// further back, and the StartedAt filter decides.
const runIDLead = time.Second

// exportChunk is how many records Export copies per read transaction.
const exportChunk = 256

// Export writes every invocation created at or after since (all when since
// is zero) as JSON Lines, oldest first, each line one record's JSON as
// stored, its checksum verified ([ParseInvocation] reads it back). It streams: it copies at most
// exportChunk records per short read transaction and writes them before
// reading on, so memory stays bounded and a slow writer never holds a
// transaction open (which would keep bbolt from growing the file for the
// writers). Each record is exported once, as it is when its chunk is read;
// records created during the export are included when newer than the
// chunk read last.
//
// With decrypt, each line is the record with its payload decrypted (the
// journal must have been opened with its key); otherwise encrypted
// payloads stay sealed, as stored.
func (j *Store) Export(w io.Writer, since time.Time, decrypt bool) error {
	if decrypt && j.sealer == nil {
		return fmt.Errorf("export: %w: decrypting needs the journal's key", journal.ErrKeyRequired)
	}
	from := []byte{}
	if !since.IsZero() {
		from = journal.MillisKey(since.UnixMilli())
	}
	return j.scan(w, bucketInvs, from, func(_ *bbolt.Tx, k, v []byte, lines [][]byte) ([][]byte, error) {
		what := fmt.Sprintf("invocation %x", k)
		v, err := journal.StripChecksum(what, v)
		if err != nil {
			return nil, err
		}
		if !since.IsZero() {
			var t struct {
				CreatedAt time.Time `json:"created_at"`
			}
			if err := json.Unmarshal(v, &t); err != nil {
				return nil, fmt.Errorf("invocation %x: %w: %v", k, journal.ErrDamaged, err)
			}
			if t.CreatedAt.Before(since) {
				return lines, nil
			}
		}
		line, err := journal.ExportLine(j.sealer, what, v, decrypt)
		return append(lines, line), err
	})
}

// scan hands each record of bucket, from key from on in key order, to
// each, which appends the lines it makes of it; a chunk of exportChunk
// records is read per transaction, and its lines are written to w once the
// transaction is over. Records added meanwhile are included when their
// keys come after the chunk read last.
func (j *Store) scan(w io.Writer, bucket, from []byte, each func(tx *bbolt.Tx, k, v []byte, lines [][]byte) ([][]byte, error)) error {
	lines := make([][]byte, 0, exportChunk)
	for next := from; next != nil; {
		lines = lines[:0]
		err := j.view(func(tx *bbolt.Tx) error {
			c := tx.Bucket(bucket).Cursor()
			k, v := c.Seek(next)
			for n := 0; k != nil && n < exportChunk; k, v = c.Next() {
				n++
				var err error
				if lines, err = each(tx, k, v, lines); err != nil {
					return err
				}
			}
			next = nil
			if k != nil {
				next = bytes.Clone(k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := journal.WriteLines(w, lines); err != nil {
			return err
		}
	}
	return nil
}
