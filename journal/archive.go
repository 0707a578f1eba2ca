package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// An archive is a whole journal as JSON Lines, for moving it to another
// backend (bbolt <-> PostgreSQL) or keeping it: each run record, then the
// run's invocation records, runs oldest first, each line an object with one
// member — {"run": RUN} or {"invocation": INVOCATION} — holding the record
// exactly as stored: its attempts, decisions, resolutions and approvals,
// its payloads sealed (or, with decrypt, in clear). Each run is read with
// its invocations at one moment, and Import writes it with them in one
// commit: a run is never seen without the invocations it had, which
// would let a worker run its completed steps again.

// maxArchiveLine bounds one line of an archive (a record's payloads are
// capped well below it).
const maxArchiveLine = 64 << 20

// archiveLine wraps a record's JSON as a line of an archive.
func archiveLine(kind string, v []byte) []byte {
	line := make([]byte, 0, len(v)+len(kind)+6)
	line = append(line, `{"`...)
	line = append(line, kind...)
	line = append(line, `":`...)
	line = append(line, bytes.TrimSuffix(v, []byte("\n"))...)
	return append(line, "}\n"...)
}

// RunLine is one run record (unsealed) as a line of an archive: checked,
// its payload decrypted when asked.
func RunLine(s *Sealer, what string, v []byte, decrypt bool) ([]byte, error) {
	var r Run
	if err := json.Unmarshal(v, &r); err != nil || r.ID.IsZero() || r.Status == runInvalid {
		return nil, fmt.Errorf("%s: %w: not a run record", what, ErrDamaged)
	}
	if decrypt {
		if err := openRun(s, &r); err != nil {
			return nil, err
		}
		var err error
		if v, err = json.Marshal(&r); err != nil {
			return nil, err
		}
	}
	return archiveLine("run", v), nil
}

// InvocationLine is one invocation record (as stored) as a line of an archive.
func InvocationLine(s *Sealer, what string, v []byte, decrypt bool) ([]byte, error) {
	b, err := StripChecksum(what, v)
	if err != nil {
		return nil, err
	}
	line, err := ExportLine(s, what, b, decrypt)
	if err != nil {
		return nil, err
	}
	return archiveLine("invocation", line), nil
}

// ImportReport says what Import wrote.
type ImportReport struct {
	Runs        int `json:"runs"`
	Invocations int `json:"invocations"`
	// Present counts the records of the runs the journal had already
	// (same id): they are left as they are, invocations included, so that
	// an import can be run again.
	Present int `json:"present"`

	Written []ID `json:"-"` // the runs written
}

// importBatch is how many records share a commit, at least (a run and its
// invocations are never split).
const importBatch = 256

// archived is one run of an archive, with its invocations.
type archived struct {
	run  *Run
	invs []*Invocation
	line int // the run's line
}

// check returns what is wrong with the run and its invocations: what
// [Store.Check] would report once they were written (the rules of
// check.go), an invocation listed twice, and an invocation that was sent
// but carries no arguments, sealed or in clear (the engine journals them,
// at least {}, before any send: one without them lost them, its "sealed"
// removed from the archive).
func (a *archived) check() []Problem {
	var probs []Problem
	add := func(rec, format string, args ...any) {
		probs = append(probs, Problem{rec, fmt.Sprintf(format, args...)})
	}
	CheckRun(a.run, add)
	var unsettled *Invocation
	seen := make(map[ID]bool, len(a.invs))
	for _, inv := range a.invs {
		name := "invocation " + inv.ID.String()
		if seen[inv.ID] {
			add(name, "listed twice")
		}
		seen[inv.ID] = true
		CheckInvocation(inv, name, add)
		if inv.State != StateSkipped && inv.Arguments == nil && inv.Sealed == "" {
			add(name, "state %s without its arguments, sealed or in clear (was %q removed from the archive?)", inv.State, "sealed")
		}
		if unsettled == nil && inv.State.Unsettled() {
			unsettled = inv
		}
	}
	CheckSucceeded(a.run.ID, a.run.Status, unsettled, add)
	return probs
}

// Import writes the runs of an archive (see [Store.Archive]) into the
// journal as they are — states, attempts, decisions, resolutions and
// approvals — each run with its invocations in one commit, several runs per
// commit. A run whose id the journal has already is left alone with its
// invocations (counted Present). Sealed payloads must be sealed with this
// journal's key (the arguments' digests are keyed by it too): an archive
// made with another key is refused, and so is a run or an invocation whose
// id a record of the other kind has (ErrExists).
//
// Before a run is committed, it and its invocations are checked with the
// rules [Store.Check] applies to records (attempts, states, idempotency
// keys, finish times, approvals, a succeeded run's calls all settled), and
// an invocation that was sent must carry its arguments, sealed or in clear
// (one whose "sealed" was removed has neither). A run that breaks a rule
// is refused whole — nothing of it is written — and the import goes on
// with the next run, so that one pass names every problem of the archive.
// The runs that pass are written; the error is then an [*ImportError]
// listing each refused run with its line and problems (it wraps
// ErrInvalid). Once the archive is fixed, importing it again writes the
// runs that were refused and leaves the others as they are.
//
// A line that is not a record of an archive, or whose payload this journal
// cannot open, stops the import, with its number; the runs committed
// before stay whole (a second import completes it).
func (w *Writer) Import(r io.Reader) (ImportReport, error) {
	var rep ImportReport
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxArchiveLine)
	type pending struct {
		p     *Pending
		a     *archived
		wrote *bool
	}
	var batch []pending
	size := 0
	flush := func() error {
		var first error
		for _, b := range batch {
			err := b.p.Wait()
			switch {
			case err != nil:
				if first == nil {
					first = fmt.Errorf("line %d: %w", b.a.line, err)
				}
			case !*b.wrote:
				rep.Present += 1 + len(b.a.invs)
			default:
				rep.Runs++
				rep.Invocations += len(b.a.invs)
				rep.Written = append(rep.Written, b.a.run.ID)
			}
		}
		batch, size = batch[:0], 0
		return first
	}
	var cur *archived
	var refused []RefusedRun
	queue := func() error {
		if cur == nil {
			return nil
		}
		a, wrote := cur, new(bool)
		cur = nil
		if probs := a.check(); len(probs) > 0 {
			refused = append(refused, RefusedRun{Run: a.run.ID, Line: a.line, Problems: probs})
			return nil
		}
		p, err := w.writeLater(func(st Tx) error {
			*wrote = false
			if has, err := st.HasRun(a.run.ID); err != nil || has {
				return err
			}
			if err := otherKind(st.HasInvocation, a.run.ID); err != nil {
				return err
			}
			if err := st.PutRun(nil, a.run); err != nil {
				return err
			}
			for _, inv := range a.invs {
				if err := otherKind(st.HasRun, inv.ID); err != nil {
					return err
				}
				if err := insertInv(st, inv); err != nil {
					return err
				}
			}
			*wrote = true
			return nil
		})
		if err != nil {
			return err
		}
		batch = append(batch, pending{p: p, a: a, wrote: wrote})
		if size += 1 + len(a.invs); size >= importBatch {
			return flush()
		}
		return nil
	}
	refusal := func() error {
		if len(refused) == 0 {
			return nil
		}
		return &ImportError{Runs: refused}
	}
	fail := func(err error) (ImportReport, error) {
		if ferr := flush(); ferr != nil {
			err = ferr
		}
		return rep, errors.Join(err, refusal())
	}
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		run, inv, err := w.importLine(line)
		if err != nil {
			return fail(fmt.Errorf("line %d: %w", n, err))
		}
		if run != nil {
			if err := queue(); err != nil {
				return fail(err)
			}
			cur = &archived{run: run, line: n}
			continue
		}
		if cur == nil || inv.RunID != cur.run.ID {
			return fail(fmt.Errorf("line %d: invocation %s does not follow its run %s: an archive lists each run, then its invocations (make one with 'mcpflow journal export --archive')", n, inv.ID, inv.RunID))
		}
		cur.invs = append(cur.invs, inv)
	}
	if err := sc.Err(); err != nil {
		return fail(fmt.Errorf("read archive: %w", err))
	}
	if err := queue(); err != nil {
		return fail(err)
	}
	return rep, errors.Join(flush(), refusal())
}

// ImportError is Import's refusal of the runs of an archive that break the
// journal's rules. Nothing of them was written; the archive's other runs
// were. It wraps ErrInvalid.
type ImportError struct {
	Runs []RefusedRun
}

// RefusedRun is a run of an archive that Import refused, with the line it
// is on and every problem found in it or in its invocations.
type RefusedRun struct {
	Run      ID
	Line     int
	Problems []Problem
}

func (e *ImportError) Error() string {
	var b strings.Builder
	if len(e.Runs) == 1 {
		b.WriteString("a run of the archive refused, whole (nothing of it written):")
	} else {
		fmt.Fprintf(&b, "%d runs of the archive refused, each whole (nothing of them written):", len(e.Runs))
	}
	for _, r := range e.Runs {
		run := "run " + r.Run.String()
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "\n  line %d: %s: ", r.Line, run)
			if p.Record != run {
				b.WriteString(p.Record + ": ")
			}
			b.WriteString(p.Message)
		}
	}
	return b.String()
}

func (e *ImportError) Unwrap() error { return ErrInvalid }

// otherKind refuses an id that a record of the other kind has (has looks
// for it): ids are unique across runs and invocations, which the journal
// relies on, and only a made-up archive could break that.
func otherKind(has func(ID) (bool, error), id ID) error {
	taken, err := has(id)
	if err == nil && taken {
		err = fmt.Errorf("id %s is both a run's and an invocation's: %w", id, ErrExists)
	}
	return err
}

// importLine decodes one line of an archive: a run or an invocation,
// checked, its sealed payload openable with this journal's key.
func (w *Writer) importLine(line []byte) (*Run, *Invocation, error) {
	var rec struct {
		Run        json.RawMessage `json:"run"`
		Invocation json.RawMessage `json:"invocation"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return nil, nil, fmt.Errorf("not JSON: %v", err)
	}
	switch {
	case rec.Run != nil && rec.Invocation == nil:
		var r Run
		if err := json.Unmarshal(rec.Run, &r); err != nil || r.ID.IsZero() || r.Status == runInvalid {
			return nil, nil, errors.New("a run without a valid id or status")
		}
		if err := w.checkSealed(r.Sealed, func(s *Sealer) error { c := r; return openRun(s, &c) }); err != nil {
			return nil, nil, fmt.Errorf("run %s: %w", r.ID, err)
		}
		return &r, nil, nil
	case rec.Invocation != nil && rec.Run == nil:
		inv, err := ParseInvocation(rec.Invocation)
		if err != nil {
			return nil, nil, err
		}
		if err := w.checkSealed(inv.Sealed, func(s *Sealer) error { c := *inv; return openInv(s, &c) }); err != nil {
			return nil, nil, fmt.Errorf("invocation %s: %w", inv.ID, err)
		}
		return nil, inv, nil
	}
	return nil, nil, errors.New(`not a line of an archive: want {"run": …} or {"invocation": …} (make one with 'mcpflow journal export --archive')`)
}

// checkSealed refuses a sealed payload this journal's key cannot open.
func (w *Writer) checkSealed(sealed string, open func(*Sealer) error) error {
	if sealed == "" {
		return nil
	}
	if w.sealer == nil {
		return fmt.Errorf("%w: its payloads are encrypted: import into a journal opened with the key they were encrypted with", ErrKeyRequired)
	}
	if err := open(w.sealer); err != nil {
		return fmt.Errorf("%w: it was encrypted with another key than this journal's (set %s to the exporting journal's key)", ErrWrongKey, KeyEnv)
	}
	return nil
}
