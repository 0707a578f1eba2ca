package postgres

import (
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/mcpflow/mcpflow/journal"
)

// Archive writes the whole journal as an archive (see [journal.Store.Archive]),
// a chunk of runs, with their invocations, per read-only snapshot.
func (p *Store) Archive(w io.Writer, decrypt bool) error {
	if decrypt && p.sealer == nil {
		return fmt.Errorf("archive: %w: decrypting needs the journal's key", journal.ErrKeyRequired)
	}
	var after [16]byte
	for {
		var lines [][]byte
		runs := 0
		err := p.read(func(tx pgx.Tx) error {
			rows, err := tx.Query(bg, `SELECT r.id, r.record, i.id, i.record FROM
					(SELECT id, record FROM mcpflow_runs WHERE id > $1 ORDER BY id LIMIT $2) r
				LEFT JOIN mcpflow_invocations i ON i.run_id = r.id ORDER BY r.id, i.id`, after, pgExportChunk)
			if err != nil {
				return err
			}
			var id [16]byte
			var rec []byte
			var invID *[16]byte
			var invRec []byte
			_, err = pgx.ForEachRow(rows, []any{&id, &rec, &invID, &invRec}, func() error {
				if runs == 0 || id != after {
					after = id
					runs++
					what := fmt.Sprintf("run %x", id)
					v, err := journal.StripChecksum(what, rec)
					if err != nil {
						return err
					}
					line, err := journal.RunLine(p.sealer, what, v, decrypt)
					if err != nil {
						return err
					}
					lines = append(lines, line)
				}
				if invID == nil {
					return nil
				}
				line, err := journal.InvocationLine(p.sealer, fmt.Sprintf("invocation %x", *invID), invRec, decrypt)
				lines = append(lines, line)
				return err
			})
			return err
		})
		if err != nil {
			return p.connErr(err)
		}
		if err := journal.WriteLines(w, lines); err != nil {
			return err
		}
		if runs < pgExportChunk {
			return nil
		}
	}
}

// Import writes an archive's runs (see [writer.Import]). The runs it
// writes are nobody's once written whole: a run that was running when its
// journal was archived is free for a worker to claim and resume, as after
// a crash.
func (p *Store) Import(r io.Reader) (journal.ImportReport, error) {
	rep, err := p.Writer.Import(r)
	if l := p.leases; l != nil && len(rep.Written) > 0 {
		ids := make([][16]byte, len(rep.Written))
		l.mu.Lock()
		for i, id := range rep.Written {
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
