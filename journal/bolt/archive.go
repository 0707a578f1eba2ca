package bolt

import (
	"bytes"
	"fmt"
	"io"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
)

// Archive writes the whole journal as an archive (see Import), a chunk of
// runs, with their invocations, per read transaction.
func (j *Store) Archive(w io.Writer, decrypt bool) error {
	if decrypt && j.sealer == nil {
		return fmt.Errorf("archive: %w: decrypting needs the journal's key", journal.ErrKeyRequired)
	}
	return j.scan(w, bucketRuns, []byte{}, func(tx *bbolt.Tx, k, v []byte, lines [][]byte) ([][]byte, error) {
		what := fmt.Sprintf("run %x", k)
		b, err := journal.StripChecksum(what, v)
		if err != nil {
			return nil, err
		}
		line, err := journal.RunLine(j.sealer, what, b, decrypt)
		if err != nil {
			return nil, err
		}
		lines = append(lines, line)
		invs, c := tx.Bucket(bucketInvs), tx.Bucket(bucketByRun).Cursor()
		for ik, _ := c.Seek(k); ik != nil && bytes.HasPrefix(ik, k); ik, _ = c.Next() {
			what := fmt.Sprintf("invocation %x", ik[16:])
			v := invs.Get(ik[16:])
			if v == nil {
				return nil, fmt.Errorf("%s: %w: indexed but missing", what, journal.ErrDamaged)
			}
			line, err := journal.InvocationLine(j.sealer, what, v, decrypt)
			if err != nil {
				return nil, err
			}
			lines = append(lines, line)
		}
		return lines, nil
	})
}
