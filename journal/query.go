package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Run returns the run with the given id.
func (j *Journal) Run(id ID) (*Run, error) {
	if rec := j.ov.get(id); rec != nil && rec.kind == recRun {
		return decodeRun(j.sealer, rec.val)
	}
	var r *Run
	err := j.viewNow(func(tx *bolt.Tx) (err error) {
		r, err = getRun(tx, id)
		return err
	})
	return r, err
}

// Invocation returns the invocation with the given id.
func (j *Journal) Invocation(id ID) (*Invocation, error) {
	if rec := j.ov.get(id); rec != nil && rec.kind == recInv {
		return decodeInv(j.sealer, rec.val)
	}
	var inv *Invocation
	err := j.viewNow(func(tx *bolt.Tx) (err error) {
		inv, err = getInv(tx, id)
		return err
	})
	return inv, err
}

// FindRun resolves a full id or a unique prefix of one to a run id. Dashes
// are ignored; an odd number of hex digits is fine.
func (j *Journal) FindRun(prefix string) (ID, error) { return j.find(bucketRuns, "run", prefix) }

// FindInvocation resolves a full id or a unique prefix of one to an
// invocation id, like FindRun.
func (j *Journal) FindInvocation(prefix string) (ID, error) {
	return j.find(bucketInvs, "invocation", prefix)
}

func (j *Journal) find(bucket []byte, what, prefix string) (ID, error) {
	whole, half, hasHalf, err := prefixBytes(prefix)
	if err != nil {
		return ID{}, err
	}
	start := whole
	if hasHalf {
		start = append(bytes.Clone(whole), half)
	}
	var found []ID
	err = j.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, _ := c.Seek(start); k != nil && bytes.HasPrefix(k, whole) && len(found) <= maxCandidates; k, _ = c.Next() {
			if hasHalf && (len(k) <= len(whole) || k[len(whole)]&0xf0 != half) {
				break
			}
			found = append(found, ID(k))
		}
		return nil
	})
	switch {
	case err != nil:
		return ID{}, err
	case len(found) == 0:
		return ID{}, fmt.Errorf("%s %q: %w", what, prefix, ErrNotFound)
	case len(found) > 1:
		return ID{}, ambiguous(what, prefix, found)
	}
	return found[0], nil
}

// maxCandidates is how many of the ids an ambiguous prefix matches are
// named.
const maxCandidates = 5

// ambiguous is the ErrAmbiguous of a prefix that matches the ids found
// (up to maxCandidates+1, in order): it names them, as git does.
func ambiguous(what, prefix string, found []ID) error {
	var names []string
	for i, id := range found {
		if i == maxCandidates {
			names = append(names, "…")
			break
		}
		names = append(names, id.String())
	}
	return fmt.Errorf("%s %q matches several: %w: %s; type more of the id", what, prefix, ErrAmbiguous, strings.Join(names, ", "))
}

// Filter selects invocations. Zero fields match everything; set fields
// must all match.
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
	// ToolError keeps only invocations that completed with a tool error.
	ToolError bool
}

func (f *Filter) match(inv *Invocation) bool {
	return (f.Run.IsZero() || inv.RunID == f.Run) && (!f.ToolError || inv.ToolError) &&
		(f.State == stateInvalid || inv.State == f.State) &&
		(f.Server == "" || inv.Server == f.Server) &&
		(f.Tool == "" || inv.Tool == f.Tool) &&
		(f.Since.IsZero() || !inv.CreatedAt.Before(f.Since)) &&
		(f.Until.IsZero() || inv.CreatedAt.Before(f.Until))
}

// Invocations lists invocations matching f, newest first. It walks the most
// selective index for f (run, then state, then server and tool), starting
// at the cursor, so a page costs what it returns plus the records the other
// filters reject; Since stops the walk at the first older id.
func (j *Journal) Invocations(f Filter) ([]Invocation, error) {
	var out []Invocation
	err := j.view(func(tx *bolt.Tx) error {
		return walkInvs(tx, f, true, func(inv *Invocation) bool {
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
func (j *Journal) CountInvocations(f Filter, most int) (n int, more bool, err error) {
	f.Limit = 0
	c := bounded{most: most}
	err = j.view(func(tx *bolt.Tx) error {
		if f == (Filter{State: StateCompleted}) && most >= 0 {
			c = countCompleted(tx, most)
			return nil
		}
		return walkInvs(tx, f, false, func(*Invocation) bool { return c.add() })
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
func countCompleted(tx *bolt.Tx, most int) bounded {
	others := 0
	c := tx.Bucket(bucketByState).Cursor()
	for s := State(1); s < numStates; s++ {
		if !s.indexed() {
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
func walkInvs(tx *bolt.Tx, f Filter, records bool, fn func(*Invocation) bool) error {
	invs := tx.Bucket(bucketInvs)
	b, prefix := invs, []byte(nil)
	// rest is f without what the index selects: when it is empty, every
	// key under the prefix matches and only the count is needed.
	rest := f
	rest.Before, rest.Since, rest.Limit = ID{}, time.Time{}, 0
	switch {
	case !f.Run.IsZero():
		b, prefix = tx.Bucket(bucketByRun), f.Run.key()
		rest.Run = ID{}
	case f.State.indexed() && f.State != stateInvalid:
		b, prefix = tx.Bucket(bucketByState), []byte{byte(f.State)}
		rest.State = stateInvalid
	case f.Server != "" && f.Tool != "":
		b, prefix = tx.Bucket(bucketByTool), toolPrefix(f.Server, f.Tool)
		rest.Server, rest.Tool = "", ""
	}
	keysOnly := !records && rest == (Filter{}) && f.Since.IsZero()
	if keysOnly && prefix == nil && f.Before.IsZero() {
		// A count of every invocation: the run index has one small entry
		// for each, so its keys fill a few pages where the records' keys
		// sit among the records themselves, thousands of pages for a
		// count of 10,000 (Check keeps the two in step).
		b = tx.Bucket(bucketByRun)
	}
	c := b.Cursor()
	for k := seekLast(c, prefix, f.Before); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		id := ID(k[len(k)-16:])
		if !f.Since.IsZero() && id.millis() < f.Since.UnixMilli() {
			break // an id's time is never before its record's CreatedAt
		}
		if keysOnly {
			if !fn(nil) {
				return nil
			}
			continue
		}
		v := invs.Get(id.key())
		if v == nil {
			return fmt.Errorf("index entry %x without a record: %w", k, ErrDamaged)
		}
		inv, err := decodeInv(sealerOf(tx), v)
		if err != nil {
			return err
		}
		if f.match(inv) && !fn(inv) {
			return nil
		}
	}
	return nil
}

// seekLast positions c on the last key that has prefix and, when before is
// set, ends in an id older than before.
func seekLast(c *bolt.Cursor, prefix []byte, before ID) []byte {
	end := append(bytes.Clone(prefix), before.key()...)
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

// RunInvocations returns a run's invocations in the order they were created.
func (j *Journal) RunInvocations(run ID) ([]Invocation, error) {
	var out []Invocation
	err := j.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketByRun).Cursor()
		p := run.key()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			inv, err := getInv(tx, ID(k[16:]))
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
	// Workflow keeps runs of the workflow of this name.
	Workflow string
	// Since keeps runs started at or after it.
	Since time.Time
	// Before is a cursor: only runs older than this id are returned.
	Before ID
	Limit  int
}

// Runs lists runs matching f, newest first.
func (j *Journal) Runs(f RunFilter) ([]Run, error) {
	var out []Run
	err := j.view(func(tx *bolt.Tx) error {
		return walkRuns(tx, f, true, func(r *Run) bool {
			out = append(out, *r)
			return f.Limit <= 0 || len(out) < f.Limit
		})
	})
	return out, err
}

// CountRuns counts the runs matching f (its Limit ignored), stopping at
// most: it returns most and true when there are more.
func (j *Journal) CountRuns(f RunFilter, most int) (n int, more bool, err error) {
	f.Limit = 0
	c := bounded{most: most}
	err = j.view(func(tx *bolt.Tx) error {
		return walkRuns(tx, f, false, func(*Run) bool { return c.add() })
	})
	return c.n, c.more, err
}

// walkRuns calls fn on each run matching f, newest first, until fn returns
// false. Unless records is set, fn may be given nil where the keys alone
// say the run matches.
func walkRuns(tx *bolt.Tx, f RunFilter, records bool, fn func(*Run) bool) error {
	c, prefix := tx.Bucket(bucketRuns).Cursor(), []byte(nil)
	if f.Status != runInvalid {
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
		id := ID(k[len(k)-16:])
		if !f.Since.IsZero() && id.millis() < f.Since.UnixMilli() {
			break // a run's id is made when it starts
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

// exportChunk is how many records Export copies per read transaction.
const exportChunk = 256

// Export writes every invocation created at or after since (all when since
// is zero) as JSON Lines, oldest first, each line one record's JSON as
// stored, its checksum verified ([DecodeInvocation] reads it back). It streams: it copies at most
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
func (j *Journal) Export(w io.Writer, since time.Time, decrypt bool) error {
	if decrypt && j.sealer == nil {
		return fmt.Errorf("export: %w: decrypting needs the journal's key", ErrKeyRequired)
	}
	from := []byte{}
	if !since.IsZero() {
		from = millisKey(since.UnixMilli())
	}
	return j.scan(w, bucketInvs, from, func(_ *bolt.Tx, k, v []byte, lines [][]byte) ([][]byte, error) {
		what := fmt.Sprintf("invocation %x", k)
		v, err := unseal(what, v)
		if err != nil {
			return nil, err
		}
		if !since.IsZero() {
			var t struct {
				CreatedAt time.Time `json:"created_at"`
			}
			if err := json.Unmarshal(v, &t); err != nil {
				return nil, fmt.Errorf("invocation %x: %w: %v", k, ErrDamaged, err)
			}
			if t.CreatedAt.Before(since) {
				return lines, nil
			}
		}
		line, err := exportLine(j.sealer, what, v, decrypt)
		return append(lines, line), err
	})
}

// scan hands each record of bucket, from key from on in key order, to
// each, which appends the lines it makes of it; a chunk of exportChunk
// records is read per transaction, and its lines are written to w once the
// transaction is over. Records added meanwhile are included when their
// keys come after the chunk read last.
func (j *Journal) scan(w io.Writer, bucket, from []byte, each func(tx *bolt.Tx, k, v []byte, lines [][]byte) ([][]byte, error)) error {
	lines := make([][]byte, 0, exportChunk)
	for next := from; next != nil; {
		lines = lines[:0]
		err := j.view(func(tx *bolt.Tx) error {
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
		if err := writeLines(w, lines); err != nil {
			return err
		}
	}
	return nil
}

// writeLines writes the lines an export read in one transaction, once it
// is over: a slow reader never holds a transaction open.
func writeLines(w io.Writer, lines [][]byte) error {
	for _, line := range lines {
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// exportLine is one invocation record's JSON (unsealed) as a line of
// Export: checked, its item written null, its payload decrypted when asked.
func exportLine(s *sealer, what string, v []byte, decrypt bool) ([]byte, error) {
	if !json.Valid(v) {
		return nil, fmt.Errorf("%s: %w: not JSON", what, ErrDamaged)
	}
	if decrypt {
		inv, err := DecodeInvocation(v)
		if err == nil {
			err = openInv(s, inv)
		}
		if err != nil {
			return nil, err
		}
		if v, err = json.Marshal(inv); err != nil {
			return nil, err
		}
	}
	return append(exportItem(v), '\n'), nil
}

// exportItem is a copy of a record's JSON with a plain step's item, stored
// as -1, written null, as every other JSON output of mcpflow has it. The
// first `,"item":` is the field: only id, run_id and step come before it,
// and a quote inside a JSON string is always escaped.
func exportItem(v []byte) []byte {
	field := []byte(`,"item":`)
	i := bytes.Index(v, field)
	if i < 0 || !bytes.HasPrefix(v[i+len(field):], []byte("-1,")) {
		return bytes.Clone(v)
	}
	out := make([]byte, 0, len(v)+2)
	out = append(out, v[:i+len(field)]...)
	out = append(out, "null"...)
	return append(out, v[i+len(field)+2:]...)
}

// DecodeInvocation decodes one invocation record's JSON (one line of
// Export; an item of null is a plain step's). A record that is not valid
// gives an error wrapping ErrDamaged.
func DecodeInvocation(b []byte) (*Invocation, error) {
	inv := Invocation{Item: -1}
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("invocation record: %w: %v", ErrDamaged, err)
	}
	if inv.ID.IsZero() || inv.RunID.IsZero() || inv.State == stateInvalid {
		return nil, fmt.Errorf("invocation record: %w: id, run id or state missing", ErrDamaged)
	}
	for _, r := range inv.Resolutions {
		if r.As == stateInvalid || r.From == stateInvalid {
			return nil, fmt.Errorf("invocation record %s: %w: resolution without states", inv.ID, ErrDamaged)
		}
	}
	return &inv, nil
}
