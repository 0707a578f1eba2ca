package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// logStore is the store of one group commit: reads see the bbolt file
// (as of a read transaction begun after the overlay dropped what it
// applied), the records durable in the log but maybe not applied yet (the
// overlay), and this group's own puts; puts are collected for the log.
type logStore struct {
	tx     *bolt.Tx
	sealer *sealer
	ov     *overlay
	puts   []*walRecord
	mine   map[ID]*walRecord // the latest put of each record in this group
}

func (s *logStore) latest(id ID) *walRecord {
	if r := s.mine[id]; r != nil {
		return r
	}
	return s.ov.get(id)
}

// inv returns the invocation as put when it is in the overlay: the writes
// only read what a store returns (they change a clone), so it is shared
// rather than decoded again.
func (s *logStore) run(id ID) (*Run, error) {
	if r := s.latest(id); r != nil && r.kind == recRun {
		return decodeRun(s.sealer, r.val)
	}
	return getRun(s.tx, id)
}

func (s *logStore) inv(id ID) (*Invocation, error) {
	if r := s.latest(id); r != nil && r.kind == recInv {
		if obj, ok := r.obj.(*Invocation); ok {
			return obj, nil
		}
		return decodeInv(s.sealer, r.val)
	}
	return getInv(s.tx, id)
}

func (s *logStore) hasRun(id ID) (bool, error) {
	if r := s.latest(id); r != nil && r.kind == recRun {
		return true, nil
	}
	return s.tx.Bucket(bucketRuns).Get(id.key()) != nil, nil
}

func (s *logStore) hasInv(id ID) (bool, error) {
	if r := s.latest(id); r != nil && r.kind == recInv {
		return true, nil
	}
	return s.tx.Bucket(bucketInvs).Get(id.key()) != nil, nil
}

func (s *logStore) put(r *walRecord) error {
	if err := r.check(); err != nil {
		return err
	}
	s.puts = append(s.puts, r)
	if s.mine == nil {
		s.mine = map[ID]*walRecord{}
	}
	s.mine[r.id] = r
	return nil
}

func (s *logStore) putRun(old, r *Run) error {
	rec, err := runRecord(s.sealer, old, r)
	if err != nil {
		return err
	}
	return s.put(rec)
}

func (s *logStore) putInv(old, inv *Invocation) error {
	if old == nil {
		if ok, _ := s.hasRun(inv.RunID); !ok {
			return fmt.Errorf("invocation %s: run %s: %w", inv.ID.Short(), inv.RunID, ErrNotFound)
		}
		if ok, _ := s.hasInv(inv.ID); ok {
			return fmt.Errorf("invocation %s: %w", inv.ID, ErrExists)
		}
	}
	rec, err := invRecord(s.sealer, old, inv)
	if err != nil {
		return err
	}
	return s.put(rec)
}

// firstWhere looks at the run's invocations in the file and those created
// since, in creation (id) order.
func (s *logStore) firstWhere(run ID, match func(State) bool) (*Invocation, error) {
	var ids []ID
	c := s.tx.Bucket(bucketByRun).Cursor()
	for k, _ := c.Seek(run.key()); k != nil && bytes.HasPrefix(k, run.key()); k, _ = c.Next() {
		ids = append(ids, ID(k[16:]))
	}
	ids = append(ids, s.ov.newInvs(run)...)
	for _, r := range s.mine {
		if r.kind == recInv && r.run == run {
			ids = append(ids, r.id)
		}
	}
	slices.SortFunc(ids, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range slices.Compact(ids) {
		if s.matches(id, match) {
			return s.inv(id)
		}
	}
	return nil, nil
}

// matches reports whether an invocation's state matches, found without
// decoding its record: as put, or from the state index, which lists every
// state but completed (State.indexed). Only the states that match are
// looked up there (the three unsettled ones, for a run's end), unless
// completed matches.
func (s *logStore) matches(id ID, match func(State) bool) bool {
	if r := s.latest(id); r != nil {
		return match(State(r.new))
	}
	idx := s.tx.Bucket(bucketByState)
	completed := match(StateCompleted)
	for st := State(1); st < numStates; st++ {
		if !st.indexed() || !completed && !match(st) {
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
func putRun(tx *bolt.Tx, old, r *Run) error {
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
func putInv(tx *bolt.Tx, old, inv *Invocation) error {
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
func firstWhere(tx *bolt.Tx, run ID, match func(State) bool) (*Invocation, error) {
	c := tx.Bucket(bucketByRun).Cursor()
	for k, _ := c.Seek(run.key()); k != nil && bytes.HasPrefix(k, run.key()); k, _ = c.Next() {
		inv, err := getInv(tx, ID(k[16:]))
		if err != nil || match(inv.State) {
			return inv, err
		}
	}
	return nil, nil
}

func getRun(tx *bolt.Tx, id ID) (*Run, error) {
	v := tx.Bucket(bucketRuns).Get(id.key())
	if v == nil {
		return nil, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return decodeRun(sealerOf(tx), v)
}

// decodeRun decodes a stored run record, its payload opened when s can.
func decodeRun(s *sealer, v []byte) (*Run, error) {
	b, err := unseal("run record", v)
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("run record: %w: %v", ErrDamaged, err)
	}
	if r.ID.IsZero() || r.Status == runInvalid {
		return nil, fmt.Errorf("run record: %w: id or status missing", ErrDamaged)
	}
	if err := openRun(s, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func getInv(tx *bolt.Tx, id ID) (*Invocation, error) {
	v := tx.Bucket(bucketInvs).Get(id.key())
	if v == nil {
		return nil, fmt.Errorf("invocation %s: %w", id, ErrNotFound)
	}
	return decodeInv(sealerOf(tx), v)
}

// decodeInv decodes a stored invocation record, its payload opened when s
// can.
func decodeInv(s *sealer, v []byte) (*Invocation, error) {
	b, err := unseal("invocation record", v)
	if err != nil {
		return nil, err
	}
	inv, err := DecodeInvocation(b)
	if err != nil {
		return nil, err
	}
	if err := openInv(s, inv); err != nil {
		return nil, err
	}
	return inv, nil
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func stateKey(s State, id ID) []byte            { return cat([]byte{byte(s)}, id.key()) }
func runStatusKey(s RunStatus, id ID) []byte    { return cat([]byte{byte(s)}, id.key()) }
func toolKey(server, tool string, id ID) []byte { return cat(toolPrefix(server, tool), id.key()) }
func toolPrefix(server, tool string) []byte {
	return cat([]byte(server), []byte{0}, []byte(tool), []byte{0})
}
