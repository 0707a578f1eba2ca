package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"
)

// An archive is a whole journal as JSON Lines, for moving it to another
// backend (bbolt ↔ PostgreSQL) or keeping it: every run record, then every
// invocation record, oldest first, each line an object with one member —
// {"run": RUN} or {"invocation": INVOCATION} — holding the record exactly
// as stored: its attempts, decisions, resolutions and approvals, its
// payloads sealed (or, with decrypt, in clear). Import reads it back.

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

// runLine is one run record (unsealed) as a line of an archive: checked,
// its payload decrypted when asked.
func runLine(s *sealer, what string, v []byte, decrypt bool) ([]byte, error) {
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

// lineWrapper writes each complete line written to it as an invocation
// line of an archive.
type lineWrapper struct {
	w   io.Writer
	buf []byte
}

func (l *lineWrapper) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := l.w.Write(archiveLine("invocation", l.buf[:i])); err != nil {
			return 0, err
		}
		l.buf = l.buf[i+1:]
	}
}

// Archive writes the whole journal as an archive (see Import).
func (j *Journal) Archive(w io.Writer, decrypt bool) error {
	if decrypt && j.sealer == nil {
		return fmt.Errorf("archive: %w: decrypting needs the journal's key", ErrKeyRequired)
	}
	next := []byte{}
	for next != nil {
		var lines [][]byte
		err := j.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketRuns).Cursor()
			k, v := c.Seek(next)
			for ; k != nil && len(lines) < exportChunk; k, v = c.Next() {
				what := fmt.Sprintf("run %x", k)
				b, err := unseal(what, v)
				if err != nil {
					return err
				}
				line, err := runLine(j.sealer, what, b, decrypt)
				if err != nil {
					return err
				}
				lines = append(lines, line)
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
		for _, line := range lines {
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
	}
	return j.Export(&lineWrapper{w: w}, time.Time{}, decrypt)
}

// ImportReport says what Import wrote.
type ImportReport struct {
	Runs        int `json:"runs"`
	Invocations int `json:"invocations"`
	// Present counts the records the journal had already (same id): they
	// are left as they are, so that an import can be run again.
	Present int `json:"present"`

	runs []ID // the runs written
}

// importBatch is how many records share a commit.
const importBatch = 256

// Import writes the records of an archive (see [Journal.Archive]) into the
// journal as they are — states, attempts, decisions, resolutions and
// approvals — in commits of importBatch records. A record whose id the
// journal has already is left alone (counted Present); an invocation
// whose run is in neither is refused. Sealed payloads must be sealed with
// this journal's key (the arguments' digests are keyed by it too): an
// archive made with another key is refused before anything of it is
// written that it concerns. The first bad line stops the import, with its
// number; what was committed before stays (a second import completes it).
func (w *writer) Import(r io.Reader) (ImportReport, error) {
	var rep ImportReport
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxArchiveLine)
	type pending struct {
		p       *Pending
		run     *Run
		wrote   *bool
		lineNum int
	}
	var batch []pending
	flush := func() error {
		for _, b := range batch {
			if err := b.p.Wait(); err != nil {
				return fmt.Errorf("line %d: %w", b.lineNum, err)
			}
			switch {
			case !*b.wrote:
				rep.Present++
			case b.run != nil:
				rep.Runs++
				rep.runs = append(rep.runs, b.run.ID)
			default:
				rep.Invocations++
			}
		}
		batch = batch[:0]
		return nil
	}
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		fn, run, wrote, err := w.importLine(line)
		if err != nil {
			flush()
			return rep, fmt.Errorf("line %d: %w", n, err)
		}
		p, err := w.writeLater(fn)
		if err != nil {
			return rep, err
		}
		batch = append(batch, pending{p: p, run: run, wrote: wrote, lineNum: n})
		if len(batch) == importBatch {
			if err := flush(); err != nil {
				return rep, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		flush()
		return rep, fmt.Errorf("read archive: %w", err)
	}
	return rep, flush()
}

// importLine decodes one line of an archive into the write that stores
// its record: the run (nil for an invocation), and whether the write
// stored it (false: the journal had it).
func (w *writer) importLine(line []byte) (func(store) error, *Run, *bool, error) {
	var rec struct {
		Run        json.RawMessage `json:"run"`
		Invocation json.RawMessage `json:"invocation"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return nil, nil, nil, fmt.Errorf("not JSON: %v", err)
	}
	wrote := new(bool)
	switch {
	case rec.Run != nil && rec.Invocation == nil:
		var r Run
		if err := json.Unmarshal(rec.Run, &r); err != nil || r.ID.IsZero() || r.Status == runInvalid {
			return nil, nil, nil, errors.New("a run without a valid id or status")
		}
		if err := w.checkSealed(r.Sealed, func(s *sealer) error { c := r; return openRun(s, &c) }); err != nil {
			return nil, nil, nil, fmt.Errorf("run %s: %w", r.ID, err)
		}
		return func(st store) error {
			*wrote = false
			if has, err := st.hasRun(r.ID); err != nil || has {
				return err
			}
			*wrote = true
			return st.putRun(nil, &r)
		}, &r, wrote, nil
	case rec.Invocation != nil && rec.Run == nil:
		inv, err := DecodeInvocation(rec.Invocation)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := w.checkSealed(inv.Sealed, func(s *sealer) error { c := *inv; return openInv(s, &c) }); err != nil {
			return nil, nil, nil, fmt.Errorf("invocation %s: %w", inv.ID, err)
		}
		return func(st store) error {
			*wrote = false
			if has, err := st.hasInv(inv.ID); err != nil || has {
				return err
			}
			if has, err := st.hasRun(inv.RunID); err != nil || !has {
				if err == nil {
					err = fmt.Errorf("invocation %s: its run %s is in neither the journal nor the archive before it: %w", inv.ID, inv.RunID, ErrNotFound)
				}
				return err
			}
			*wrote = true
			return st.putInv(nil, inv)
		}, nil, wrote, nil
	}
	return nil, nil, nil, errors.New(`not a line of an archive: want {"run": …} or {"invocation": …} (make one with 'mcpflow journal export --archive')`)
}

// checkSealed refuses a sealed payload this journal's key cannot open.
func (w *writer) checkSealed(sealed string, open func(*sealer) error) error {
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

// Archive writes the whole journal as an archive (see [Journal.Archive]).
func (p *Postgres) Archive(w io.Writer, decrypt bool) error {
	if decrypt && p.sealer == nil {
		return fmt.Errorf("archive: %w: decrypting needs the journal's key", ErrKeyRequired)
	}
	var after [16]byte
	for {
		rows, err := p.pool.Query(bg, `SELECT id, record FROM mcpflow_runs WHERE id > $1 ORDER BY id LIMIT $2`, after, exportChunk)
		if err != nil {
			return p.connErr(err)
		}
		var id [16]byte
		var rec []byte
		var lines [][]byte
		_, err = pgx.ForEachRow(rows, []any{&id, &rec}, func() error {
			after = id
			what := fmt.Sprintf("run %x", id)
			v, err := unseal(what, rec)
			if err != nil {
				return err
			}
			line, err := runLine(p.sealer, what, v, decrypt)
			lines = append(lines, line)
			return err
		})
		if err != nil {
			return err
		}
		for _, line := range lines {
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
		if len(lines) < exportChunk {
			return p.Export(&lineWrapper{w: w}, time.Time{}, decrypt)
		}
	}
}

// Import writes an archive's records (see [writer.Import]). The runs it
// writes are nobody's: a run that was running when its journal was
// archived is free for a worker to claim and resume, as after a crash.
func (p *Postgres) Import(r io.Reader) (ImportReport, error) {
	rep, err := p.writer.Import(r)
	if l := p.leases; l != nil && len(rep.runs) > 0 {
		ids := make([][16]byte, len(rep.runs))
		l.mu.Lock()
		for i, id := range rep.runs {
			ids[i] = uuidOf(id)
			delete(l.held, id)
		}
		l.mu.Unlock()
		if _, rerr := p.pool.Exec(bg, `UPDATE mcpflow_runs SET owner = NULL, session = NULL WHERE id = ANY($1) AND session = $2`,
			ids, uuidOf(l.session)); rerr != nil && err == nil {
			err = p.connErr(rerr)
		}
	}
	return rep, err
}
