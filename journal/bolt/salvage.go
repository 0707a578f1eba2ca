package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// SalvageReport says what Salvage copied and what it could not.
type SalvageReport struct {
	Runs, Invocations int // records copied
	// FromLog is how many of them were taken from the journal's log: the
	// writes a crash left there that the file did not hold yet.
	FromLog int
	// Lost are the records that could not be read, and the invocations
	// whose run was lost (an invocation is kept only with its run), each
	// with the reason.
	Lost []LostRecord
}

// LostRecord is a record Salvage did not copy.
type LostRecord struct {
	Kind   string // "run" or "invocation"
	Key    string // the record's id, or its raw key when the id is unreadable
	Reason string
}

// Salvage copies every readable record of the journal at src into a new
// journal at dst, with its indexes rebuilt, and reports what it could not
// copy. The writes src's log holds beyond the file are copied too. src
// (and its log) is opened read-only and never written: a damaged journal is
// saved, not repaired in place. dst must not exist. When src's structure
// is too damaged for bbolt to walk, Salvage copies what it can reach
// before the damage and reports the rest as lost.
//
// With key, encrypted payloads are decrypted from src and encrypted again
// in dst; without it they are copied sealed, as they are.
func Salvage(src, dst string, key *journal.Key) (SalvageReport, error) {
	var rep SalvageReport
	if _, err := os.Stat(dst); err == nil {
		return rep, fmt.Errorf("salvage: %s exists already: choose a new file", dst)
	}
	db, err := bbolt.Open(src, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 500 * time.Millisecond})
	if err != nil {
		return rep, fmt.Errorf("salvage %s: %w", src, err)
	}
	defer db.Close()
	s := journal.NewSealer(key)
	runs := map[journal.ID]*journal.Run{}
	invs := map[journal.ID]*journal.Invocation{}
	var srcKeyID string
	var applied uint64
	var logID []byte
	readErr := func() (err error) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", journal.ErrDamaged, r)
			}
		}()
		return db.View(func(tx *bbolt.Tx) error {
			version := uint64(SchemaVersion)
			if m := tx.Bucket(bucketMeta); m != nil {
				srcKeyID = string(m.Get(keyKeyID))
				applied, logID = walState(tx)
				if v := m.Get(keyVersion); len(v) == 8 {
					version = binary.BigEndian.Uint64(v)
				}
			}
			if version > SchemaVersion {
				return fmt.Errorf("salvage %s: %w", src, journal.ErrNewerSchema)
			}
			stored := func(v []byte) []byte {
				if version < 2 {
					return journal.AddChecksum(bytes.Clone(v)) // schema 1 stored records without a checksum
				}
				return v
			}
			if key != nil && srcKeyID != "" && srcKeyID != key.ID() {
				return fmt.Errorf("salvage %s: %w: it records key %s, this key is %s", src, journal.ErrWrongKey, srcKeyID, key.ID())
			}
			if b := tx.Bucket(bucketRuns); b != nil {
				b.ForEach(func(k, v []byte) error {
					r, err := journal.DecodeRun(s, stored(v))
					if err != nil || string(r.ID.Bytes()) != string(k) {
						rep.Lost = append(rep.Lost, LostRecord{"run", keyText(k), reason(err, "stored under another id")})
						return nil
					}
					runs[r.ID] = r
					return nil
				})
			}
			if b := tx.Bucket(bucketInvs); b != nil {
				b.ForEach(func(k, v []byte) error {
					inv, err := journal.DecodeInvocation(s, stored(v))
					if err != nil || string(inv.ID.Bytes()) != string(k) {
						rep.Lost = append(rep.Lost, LostRecord{"invocation", keyText(k), reason(err, "stored under another id")})
						return nil
					}
					invs[inv.ID] = inv
					return nil
				})
			}
			return nil
		})
	}()
	if errors.Is(readErr, journal.ErrWrongKey) || errors.Is(readErr, journal.ErrNewerSchema) {
		return rep, readErr
	}
	if readErr != nil {
		rep.Lost = append(rep.Lost, LostRecord{"file", src, "reading stopped at damage: " + readErr.Error()})
	}
	// The log's writes the file lacks are newer than the file's records:
	// each replaces its record.
	fromLog := map[journal.ID]bool{}
	logPath := walPath(src)
	entries, missing, logErr := salvageLog(logPath, applied, logID)
	if logErr != nil {
		rep.Lost = append(rep.Lost, LostRecord{"log", logPath, logErr.Error()})
	}
	for _, seq := range missing {
		rep.Lost = append(rep.Lost, LostRecord{"log entry", fmt.Sprint(seq), "unreadable: the writes it carried are lost"})
	}
	for _, e := range entries {
		for _, r := range e.recs {
			var err error
			switch r.kind {
			case recRun:
				var run *journal.Run
				if run, err = journal.DecodeRun(s, r.val); err == nil {
					runs[run.ID] = run
				}
			case recInv:
				var inv *journal.Invocation
				if inv, err = journal.DecodeInvocation(s, r.val); err == nil {
					invs[inv.ID] = inv
				}
			}
			if err != nil {
				rep.Lost = append(rep.Lost, LostRecord{"log record", r.id.String(), reason(err, "unreadable")})
				continue
			}
			fromLog[r.id] = true
		}
	}
	rep.FromLog = len(fromLog)
	out, err := Open(dst, &journal.Options{Key: key})
	if err != nil {
		return rep, err
	}
	defer out.Close()
	ids := make([]journal.ID, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return string(ids[a][:]) < string(ids[b][:]) })
	err = out.update(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets {
			tx.Bucket(name).FillPercent = 1.0 // a new file, written at once: full pages (as bbolt.Compact makes them)
		}
		if key == nil && srcKeyID != "" {
			// Payloads stay sealed under the source's key: so says dst.
			if err := tx.Bucket(bucketMeta).Put(keyKeyID, []byte(srcKeyID)); err != nil {
				return err
			}
		}
		for _, id := range ids {
			if err := putRun(tx, nil, runs[id]); err != nil {
				return err
			}
			rep.Runs++
		}
		invIDs := make([]journal.ID, 0, len(invs))
		for id := range invs {
			invIDs = append(invIDs, id)
		}
		sort.Slice(invIDs, func(a, b int) bool { return string(invIDs[a][:]) < string(invIDs[b][:]) })
		for _, id := range invIDs {
			inv := invs[id]
			if _, ok := runs[inv.RunID]; !ok {
				rep.Lost = append(rep.Lost, LostRecord{"invocation", inv.ID.String(), "its run " + inv.RunID.String() + " was lost"})
				continue
			}
			if err := putInv(tx, nil, inv); errors.Is(err, berrors.ErrKeyTooLarge) || errors.Is(err, berrors.ErrValueTooLarge) {
				rep.Lost = append(rep.Lost, LostRecord{"invocation", inv.ID.String(), err.Error()})
				continue
			} else if err != nil {
				return err
			}
			rep.Invocations++
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("salvage into %s: %w", dst, err)
	}
	return rep, nil
}

// salvageLog reads the entries of the journal log at path after applied,
// as far as they can be read: the log's own checks are for Open, which
// must not guess; a salvage takes every intact entry of the journal after
// applied, in order, and reports the numbers it could not read. Without
// the journal's id (its meta could not be read) it keeps to the entries
// that follow one another from the log's start. Entries of another
// journal are left out.
func salvageLog(path string, applied uint64, id []byte) (entries []walEntry, missing []uint64, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	bySeq := map[uint64][]byte{}
	var last uint64
	for off := 0; off+walHeader <= len(data); off += walAlign {
		seq, eid, p, ok := walEntryAt(data, off)
		switch {
		case id == nil && (!ok || (off > 0 && seq != last+1)):
			off = len(data) // the chain from the start ends here
		case !ok || seq <= applied:
		case id != nil && !bytes.Equal(eid, id):
			return nil, nil, fmt.Errorf("%w: it is another journal's", journal.ErrForeignLog)
		default:
			bySeq[seq] = p
		}
		if ok {
			last = seq
		}
	}
	seqs := make([]uint64, 0, len(bySeq))
	for seq := range bySeq {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
	next := applied + 1
	for _, seq := range seqs {
		for ; next < seq; next++ {
			missing = append(missing, next)
		}
		recs, err := decodeRecords(bySeq[seq])
		if err != nil {
			missing = append(missing, seq)
		} else {
			entries = append(entries, walEntry{seq, recs, walNext(0, len(bySeq[seq]))})
		}
		next = seq + 1
	}
	return entries, missing, nil
}

func keyText(k []byte) string {
	if len(k) == 16 {
		return journal.ID(k).String()
	}
	return fmt.Sprintf("%x", k)
}

func reason(err error, otherwise string) string {
	if err == nil {
		return otherwise
	}
	if errors.Is(err, journal.ErrDamaged) {
		return err.Error()
	}
	return otherwise + ": " + err.Error()
}
