package journal

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// boltStore is the store of one bbolt transaction: records in their
// buckets, with the index entries that follow them.
type boltStore struct{ tx *bolt.Tx }

func (b boltStore) run(id ID) (*Run, error)        { return getRun(b.tx, id) }
func (b boltStore) inv(id ID) (*Invocation, error) { return getInv(b.tx, id) }
func (b boltStore) putRun(old, r *Run) error       { return putRun(b.tx, old, r) }
func (b boltStore) putInv(old, inv *Invocation) error {
	if old == nil {
		if b.tx.Bucket(bucketRuns).Get(inv.RunID.key()) == nil {
			return fmt.Errorf("invocation %s: run %s: %w", inv.ID.Short(), inv.RunID, ErrNotFound)
		}
		if b.tx.Bucket(bucketInvs).Get(inv.ID.key()) != nil {
			return fmt.Errorf("invocation %s: %w", inv.ID, ErrExists)
		}
	}
	return putInv(b.tx, old, inv)
}
func (b boltStore) hasRun(id ID) (bool, error) {
	return b.tx.Bucket(bucketRuns).Get(id.key()) != nil, nil
}
func (b boltStore) hasInv(id ID) (bool, error) {
	return b.tx.Bucket(bucketInvs).Get(id.key()) != nil, nil
}
func (b boltStore) firstWhere(run ID, match func(State) bool) (*Invocation, error) {
	return firstWhere(b.tx, run, match)
}

// firstWhere returns the first invocation of run whose state matches, or nil.
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

// putRun writes r and moves its index entries from old (nil when new).
func putRun(tx *bolt.Tx, old, r *Run) error {
	b, err := encodeRun(sealerOf(tx), r)
	if err != nil {
		return err
	}
	idx := tx.Bucket(bucketRunStatus)
	if old != nil {
		if err := idx.Delete(runStatusKey(old.Status, old.ID)); err != nil {
			return err
		}
	}
	if err := idx.Put(runStatusKey(r.Status, r.ID), nil); err != nil {
		return err
	}
	return tx.Bucket(bucketRuns).Put(r.ID.key(), seal(b))
}

// putInv writes inv and moves its index entries from old (nil when new).
func putInv(tx *bolt.Tx, old, inv *Invocation) error {
	b, err := encodeInv(sealerOf(tx), inv)
	if err != nil {
		return err
	}
	states := tx.Bucket(bucketByState)
	if old == nil {
		if err := tx.Bucket(bucketByRun).Put(cat(inv.RunID.key(), inv.ID.key()), nil); err != nil {
			return err
		}
		if err := tx.Bucket(bucketByTool).Put(toolKey(inv.Server, inv.Tool, inv.ID), nil); err != nil {
			return err
		}
	} else if err := states.Delete(stateKey(old.State, old.ID)); err != nil { // a no-op when absent
		return err
	}
	if inv.State.indexed() {
		if err := states.Put(stateKey(inv.State, inv.ID), nil); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketInvs).Put(inv.ID.key(), seal(b))
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
