package journal

import (
	"time"
)

// Options configures Open. A nil *Options means the defaults.
type Options struct {
	// LockTimeout is how long Open waits for another process to release the
	// file before returning ErrLocked. Default 1s.
	LockTimeout time.Duration
	// ReadOnly opens the journal for reading only; it shares the file with
	// other readers.
	ReadOnly bool
	// Now is the clock used for timestamps and for the ids the journal
	// assigns. Default time.Now.
	Now func() time.Time
	// Key encrypts the payloads of records (see Key). The first read-write
	// open with a key records the key's id; then the journal refuses
	// another key (ErrWrongKey), and writes without a key (ErrKeyRequired).
	// Without a key, an encrypted journal's payloads read as Sealed.
	Key *Key
	// AfterCommit, when set, is called after each commit is durable and
	// before any writer of it returns: the point where a crash test kills
	// the process to prove that what a commit carries is enough.
	AfterCommit func()
	// AfterApply, when set, is called after each background commit of
	// the log into the bbolt file (see Stats.Applies): the other point
	// where a crash test kills the process. It must not use the journal.
	AfterApply func()
	// ApplyIdle is how long the log must be quiet before its writes are
	// committed into the bbolt file in the background (default 1 s;
	// they are committed sooner when 1 MiB of the log waits or a read needs
	// them).
	ApplyIdle time.Duration
	// OnCommit, when set, is told of each commit after it is durable (or
	// failed): when it started, how long it took and how many facts it
	// carried. For metrics and traces; it must not block, and it must not
	// write to the journal.
	OnCommit func(Commit)
	// Worker names this process among the workers sharing a PostgreSQL
	// journal (default host:pid); Lease is how long its runs stay its own
	// without a heartbeat (default DefaultLease); Serves says it claims
	// the runs of others (mcpflow server). The bbolt file ignores them: it
	// has one writer.
	Worker string
	Lease  time.Duration
	Serves bool
}

// Pending is a journal write queued to ride with the next commit instead
// of making its own: the next write that commits (any writer's) carries
// it, in the same bbolt transaction and before its own write. Until then
// it is not durable — a crash loses it — and nothing may depend on it:
// call Wait first, or let a later write of the same goroutine commit (a
// write that returns nil was committed after, or with, every write queued
// before it). Close commits what is still queued.
type Pending struct {
	wait func() error
	done <-chan struct{} // closed once the write is committed or failed
}

// Wait returns once the write is committed (nil: durable) or failed,
// committing it now if no other write has.
func (p *Pending) Wait() error { return p.wait() }

// Committed returns the Pending of a write that a Later method committed
// durably before it returned, as a journal whose Later writes are
// immediate does (the journal of another process, package client): Wait
// returns nil at once and Done reports true.
func Committed() *Pending {
	done := make(chan struct{})
	close(done)
	return &Pending{wait: func() error { return nil }, done: done}
}

// Done reports whether the write is committed or failed, without waiting.
func (p *Pending) Done() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stats counts the journal's writes since it was opened.
type Stats struct {
	// Commits is the number of durable commits (on a bbolt journal, log
	// appends: one write and one fdatasync each); Writes the number of
	// journal facts they carried (a commit shared by concurrent writers
	// carries many); Pages the pages written, to the log and to the file
	// (meta pages included); Applies the background bbolt commits that
	// moved the log into the file (each two fdatasyncs).
	Commits, Writes, Pages, Applies int64
	// Log: the journal writes through its write-ahead log (a bbolt journal
	// opened to write). Unapplied is then the size in bytes of the log's
	// entries not in the file yet, and ApplyErr why the last background
	// commit failed (nil once one succeeds; it is tried again every second,
	// and writes go on into the log until it is full). LogSync is the
	// time the log's appends spent in fdatasync: over a span of time, its
	// growth is the share of that span a flush was in progress (while one
	// is, Go keeps a core for it), and over Commits' growth, a flush's mean
	// duration.
	Log       bool
	Unapplied int64
	ApplyErr  error
	LogSync   time.Duration
}

// Commit is one group commit, as Options.OnCommit is told of it.
type Commit struct {
	Start    time.Time
	Duration time.Duration
	// Writes is the number of journal facts the commit carried.
	Writes int
	Err    error
}
