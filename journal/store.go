package journal

import (
	"io"
	"time"
)

// Tx is what the journal's writes need of one transaction of a
// backend: records by id, written with their index entries. The rules
// (legal transitions, attempts, decisions, resolutions, approvals) are the
// writer's, once, for every backend; a Tx only keeps records.
type Tx interface {
	// inv may return a record the store keeps: the caller changes a
	// clone (cloneInv), never what it was given. Run returns a record
	// decoded for the caller, which EndRun hands on (asCommitted).
	Run(ID) (*Run, error)
	Invocation(ID) (*Invocation, error)
	// PutRun and putInv write a record, moving its index entries from
	// old (nil for a new record; putInv then fails with ErrExists when
	// the id is taken, ErrNotFound when its run is not there).
	PutRun(old, r *Run) error
	PutInvocation(old, inv *Invocation) error
	HasRun(ID) (bool, error)
	HasInvocation(ID) (bool, error)
	// FirstWhere is the first invocation of run, in creation order, whose
	// state matches, or nil.
	FirstWhere(run ID, match func(State) bool) (*Invocation, error)
}

// Writer holds the journal's writes, shared by its backends: each write
// is a function of a store, run by the backend in one durable commit
// (write) or queued to ride with the next one (writeLater).
type Writer struct {
	now        func() time.Time
	ids        IDGen
	sealer     *Sealer // nil: payloads are stored as given
	write      func(func(Tx) error) error
	writeLater func(func(Tx) error) (*Pending, error)
	answers    *answerWaits // see AnswerGiven
}

// NewWriter returns the writer of a backend that commits a write with
// write and queues one with writeLater; s seals payloads (nil: stored as
// given); now is the clock (nil: time.Now).
func NewWriter(now func() time.Time, s *Sealer, write func(func(Tx) error) error, writeLater func(func(Tx) error) (*Pending, error)) Writer {
	return Writer{now: now, sealer: s, write: write, writeLater: writeLater, answers: &answerWaits{}}
}

// Store is the journal's contract, which each backend keeps: the bbolt
// file (journal/bolt) and PostgreSQL (journal/postgres). Both have the same
// states, legal transitions and durability (a write is committed when it
// returns nil; a Pending is committed when Wait returns nil), the same
// queries, and their own Check.
type Store interface {
	CreateRun(*Run) error
	CreateRunLater(*Run) (*Pending, error)
	SetRunStatus(ID, RunStatus, *Error) error
	EndRun(ID, RunStatus, *Error, map[string]any) (*Run, error)
	RequestApproval(run ID, step, message string) (*Approval, error)
	DecideApproval(run ID, step string, as ApprovalState, by, reason string) (*Approval, error)
	DecideInAdvance(run ID, step string, as ApprovalState, by, reason string) (*Approval, error)
	Begin(*Invocation) (Intent, error)
	Skip(*Invocation) error
	SkipLater(*Invocation) (*Pending, error)
	Again(ID, NextAttempt) (Intent, error)
	Finish(Intent, Outcome) error
	FinishLater(Intent, Outcome) (*Pending, error)
	Interrupted(ID, Outcome) error
	Decide(ID, Decision, State, *Error) error
	Resolve(ID, Resolution, *Result) error
	Answer(id ID, attempt int, answers []Answer) (*Input, error)
	Ask(id ID, attempt int, in Input) error

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

// Shared is what a journal several processes work on at once offers
// beyond [Store] (PostgreSQL; the bbolt file has one writer and is not
// Shared). Front ends ask for it with a type assertion on this interface
// alone.
//
// A run is worked on only by the process that holds its lease: a run a
// process starts is its own; one it resumes it acquires first; either is
// released when it stops there. A run lost to another worker (this
// process was paused past its lease) is reported to OnLost at once, and
// its writes are refused ([ErrLeaseLost]) from then on.
type Shared interface {
	Store
	// Worker is this process's worker id ("" when it is not a worker:
	// it then claims nothing).
	Worker() string
	// Workers lists the registered workers, live ones first, with the
	// runs each holds.
	Workers() ([]Worker, error)
	// Claim takes up to n free runs (submitted ones, and those of a dead
	// or paused worker) for this worker to resume.
	Claim(n int) ([]ID, error)
	Acquire(ID) error
	Release(ID) error
	OnLost(func(ID))
	// OnFreed sets what is told, within moments, when a running run may
	// have become free to claim (submitted, or let go by a worker): a
	// worker claims it then rather than at its next poll. It must not
	// block.
	OnFreed(func())
	// A cancel asked in one process reaches the one that holds the run.
	RequestCancel(run ID, reason string) (bool, error)
	CancelRequested(ID) (string, bool, error)
	OnCancel(func(run ID, reason string))
}
