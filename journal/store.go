package journal

import (
	"context"
	"io"
	"strings"
	"time"
)

// store is what the journal's writes need of one transaction of a
// backend: records by id, written with their index entries. The rules
// (legal transitions, attempts, decisions, resolutions, approvals) are the
// writer's, once, for every backend; a store only keeps records.
type store interface {
	// inv may return a record the store keeps: the caller changes a
	// clone (cloneInv), never what it was given. run returns a record
	// decoded for the caller, which EndRun hands on (asCommitted).
	run(ID) (*Run, error)
	inv(ID) (*Invocation, error)
	// putRun and putInv write a record, moving its index entries from
	// old (nil for a new record; putInv then fails with ErrExists when
	// the id is taken, ErrNotFound when its run is not there).
	putRun(old, r *Run) error
	putInv(old, inv *Invocation) error
	hasRun(ID) (bool, error)
	hasInv(ID) (bool, error)
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

// Store is the journal's contract, which each backend keeps: the bbolt
// file ([Open]) and PostgreSQL ([OpenPostgres]). Both have the same
// states, legal transitions and durability (a write is committed when it
// returns nil; a Pending is committed when Wait returns nil), the same
// queries, and their own Check.
type Store interface {
	CreateRun(*Run) error
	CreateRunLater(*Run) (*Pending, error)
	SetRunStatus(ID, RunStatus, *Error) error
	EndRun(ID, RunStatus, *Error, map[string]any) (*Run, error)
	RequestApproval(run ID, step, message string) error
	DecideApproval(run ID, step string, as ApprovalState, by, reason string) (*Approval, error)
	Begin(*Invocation) (Intent, error)
	Skip(*Invocation) error
	SkipLater(*Invocation) (*Pending, error)
	Again(ID, NextAttempt) (Intent, error)
	Finish(Intent, Outcome) error
	FinishLater(Intent, Outcome) (*Pending, error)
	Interrupted(ID, Outcome) error
	Decide(ID, Decision, State, *Error) error
	Resolve(ID, Resolution, *Result) error

	Run(ID) (*Run, error)
	Invocation(ID) (*Invocation, error)
	FindRun(prefix string) (ID, error)
	FindInvocation(prefix string) (ID, error)
	Runs(RunFilter) ([]Run, error)
	CountRuns(f RunFilter, most int) (n int, more bool, err error)
	Invocations(Filter) ([]Invocation, error)
	CountInvocations(f Filter, most int) (n int, more bool, err error)
	RunInvocations(ID) ([]Invocation, error)
	Export(w io.Writer, since time.Time, decrypt bool) error
	Archive(w io.Writer, decrypt bool) error
	Import(io.Reader) (ImportReport, error)

	Check() ([]Problem, error)
	Prune(before time.Time, dryRun bool) (PruneReport, error)
	Sealed() bool
	Digest([]byte) string
	Stats() Stats
	Close() error
}

var _ Store = (*Journal)(nil)

// OpenStore opens the journal at location: a PostgreSQL URL
// (postgres://… or postgresql://…, see [OpenPostgres]) or the path of a
// bbolt file (see [Open]). On an error the Store is nil, not a nil
// *Postgres or *Journal in a Store: a caller's j != nil means open.
func OpenStore(location string, o *Options) (Store, error) {
	if IsPostgres(location) {
		p, err := OpenPostgres(context.Background(), location, o)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	j, err := Open(location, o)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// IsPostgres reports whether location names a PostgreSQL journal.
func IsPostgres(location string) bool {
	return strings.HasPrefix(location, "postgres://") || strings.HasPrefix(location, "postgresql://")
}
