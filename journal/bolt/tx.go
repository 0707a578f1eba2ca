package bolt

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
)

// logStore is the store of one group commit: reads see the bbolt file
// (as of a read transaction begun after the overlay dropped what it
// applied), the records durable in the log but maybe not applied yet (the
// overlay), and this group's own puts; puts are collected for the log.
type logStore struct {
	tx     *bbolt.Tx
	sealer *journal.Sealer
	ov     *overlay
	puts   []*walRecord
	mine   map[journal.ID]*walRecord // the latest put of each record in this group
}

func (s *logStore) latest(id journal.ID) *walRecord {
	if r := s.mine[id]; r != nil {
		return r
	}
	return s.ov.get(id)
}

// inv returns the invocation as put when it is in the overlay: the writes
// only read what a store returns (they change a clone), so it is shared
// rather than decoded again.
func (s *logStore) Run(id journal.ID) (*journal.Run, error) {
	if r := s.latest(id); r != nil && r.kind == recRun {
		return journal.DecodeRun(s.sealer, r.val)
	}
	return getRun(s.tx, id)
}

func (s *logStore) Invocation(id journal.ID) (*journal.Invocation, error) {
	if r := s.latest(id); r != nil && r.kind == recInv {
		if obj, ok := r.obj.(*journal.Invocation); ok {
			return obj, nil
		}
		return journal.DecodeInvocation(s.sealer, r.val)
	}
	return getInv(s.tx, id)
}

func (s *logStore) HasRun(id journal.ID) (bool, error) {
	if r := s.latest(id); r != nil && r.kind == recRun {
		return true, nil
	}
	return s.tx.Bucket(bucketRuns).Get(id.Bytes()) != nil, nil
}

func (s *logStore) HasInvocation(id journal.ID) (bool, error) {
	if r := s.latest(id); r != nil && r.kind == recInv {
		return true, nil
	}
	return s.tx.Bucket(bucketInvs).Get(id.Bytes()) != nil, nil
}

func (s *logStore) put(r *walRecord) error {
	if err := r.check(); err != nil {
		return err
	}
	s.puts = append(s.puts, r)
	if s.mine == nil {
		s.mine = map[journal.ID]*walRecord{}
	}
	s.mine[r.id] = r
	return nil
}

func (s *logStore) PutRun(old, r *journal.Run) error {
	rec, err := runRecord(s.sealer, old, r)
	if err != nil {
		return err
	}
	return s.put(rec)
}

func (s *logStore) PutInvocation(old, inv *journal.Invocation) error {
	if old == nil {
		if ok, _ := s.HasRun(inv.RunID); !ok {
			return fmt.Errorf("invocation %s: run %s: %w", inv.ID.Short(), inv.RunID, journal.ErrNotFound)
		}
		if ok, _ := s.HasInvocation(inv.ID); ok {
			return fmt.Errorf("invocation %s: %w", inv.ID, journal.ErrExists)
		}
	}
	rec, err := invRecord(s.sealer, old, inv)
	if err != nil {
		return err
	}
	return s.put(rec)
}

// FirstWhere looks at the run's invocations in the file and those created
// since, in creation (id) order.
func (s *logStore) FirstWhere(run journal.ID, match func(journal.State) bool) (*journal.Invocation, error) {
	var ids []journal.ID
	c := s.tx.Bucket(bucketByRun).Cursor()
	for k, _ := c.Seek(run.Bytes()); k != nil && bytes.HasPrefix(k, run.Bytes()); k, _ = c.Next() {
		ids = append(ids, journal.ID(k[16:]))
	}
	ids = append(ids, s.ov.newInvs(run)...)
	for _, r := range s.mine {
		if r.kind == recInv && r.run == run {
			ids = append(ids, r.id)
		}
	}
	slices.SortFunc(ids, func(a, b journal.ID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range slices.Compact(ids) {
		if s.matches(id, match) {
			return s.Invocation(id)
		}
	}
	return nil, nil
}

// matches reports whether an invocation's state matches, found without
// decoding its record: as put, or from the state index, which lists every
// state but completed (indexed). Only the states that match are
// looked up there (the three unsettled ones, for a run's end), unless
// completed matches.
func (s *logStore) matches(id journal.ID, match func(journal.State) bool) bool {
	if r := s.latest(id); r != nil {
		return match(journal.State(r.new))
	}
	idx := s.tx.Bucket(bucketByState)
	completed := match(journal.StateCompleted)
	for _, st := range journal.States() {
		if !indexed(st) || !completed && !match(st) {
			continue // not listed; or neither a hit nor a miss would match
		}
		if idx.Get(stateKey(st, id)) != nil {
			return match(st)
		}
	}
	return completed
}

// putRun writes r and moves its index entries from old (nil when new),
// straight into the file.
func putRun(tx *bbolt.Tx, old, r *journal.Run) error {
	rec, err := runRecord(sealerOf(tx), old, r)
	if err == nil {
		err = rec.check()
	}
	if err != nil {
		return err
	}
	return rec.apply(tx)
}

// putInv writes inv and moves its index entries from old (nil when new),
// straight into the file.
func putInv(tx *bbolt.Tx, old, inv *journal.Invocation) error {
	rec, err := invRecord(sealerOf(tx), old, inv)
	if err == nil {
		err = rec.check()
	}
	if err != nil {
		return err
	}
	return rec.apply(tx)
}

// firstWhere returns the first invocation of run in the file whose state
// matches, or nil.
func firstWhere(tx *bbolt.Tx, run journal.ID, match func(journal.State) bool) (*journal.Invocation, error) {
	c := tx.Bucket(bucketByRun).Cursor()
	for k, _ := c.Seek(run.Bytes()); k != nil && bytes.HasPrefix(k, run.Bytes()); k, _ = c.Next() {
		inv, err := getInv(tx, journal.ID(k[16:]))
		if err != nil || match(inv.State) {
			return inv, err
		}
	}
	return nil, nil
}

func getRun(tx *bbolt.Tx, id journal.ID) (*journal.Run, error) {
	v := tx.Bucket(bucketRuns).Get(id.Bytes())
	if v == nil {
		return nil, fmt.Errorf("run %s: %w", id, journal.ErrNotFound)
	}
	return journal.DecodeRun(sealerOf(tx), v)
}

func getInv(tx *bbolt.Tx, id journal.ID) (*journal.Invocation, error) {
	v := tx.Bucket(bucketInvs).Get(id.Bytes())
	if v == nil {
		return nil, fmt.Errorf("invocation %s: %w", id, journal.ErrNotFound)
	}
	return journal.DecodeInvocation(sealerOf(tx), v)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func stateKey(s journal.State, id journal.ID) []byte { return cat([]byte{byte(s)}, id.Bytes()) }

func runStatusKey(s journal.RunStatus, id journal.ID) []byte { return cat([]byte{byte(s)}, id.Bytes()) }

func toolKey(server, tool string, id journal.ID) []byte {
	return cat(toolPrefix(server, tool), id.Bytes())
}

func toolPrefix(server, tool string) []byte {
	return cat([]byte(server), []byte{0}, []byte(tool), []byte{0})
}
