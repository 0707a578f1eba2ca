package journal

import "time"

// store is what the journal's writes need of one transaction of a
// backend: records by id, written with their index entries. The rules
// (legal transitions, attempts, decisions, resolutions, approvals) are the
// writer's, once, for every backend; a store only keeps records.
type store interface {
	run(ID) (*Run, error)
	inv(ID) (*Invocation, error)
	// putRun and putInv write a record, moving its index entries from
	// old (nil for a new record).
	putRun(old, r *Run) error
	putInv(old, inv *Invocation) error
	hasRun(ID) bool
	hasInv(ID) bool
	// firstWhere is the first invocation of run, in creation order, whose
	// state matches, or nil.
	firstWhere(run ID, match func(State) bool) (*Invocation, error)
}

// writer holds the journal's writes, shared by its backends: each write
// is a function of a store, run by the backend in one durable commit
// (write) or queued to ride with the next one (writeLater).
type writer struct {
	now        func() time.Time
	ids        idGen
	sealer     *sealer // nil: payloads are stored as given
	write      func(func(store) error) error
	writeLater func(func(store) error) (*Pending, error)
}
