package journal

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/mcpflow/mcpflow/internal/atomicfile"
)

// SchemaVersion is the version of the record layout this code writes.
// Migrations from older versions run in [migrate].
const SchemaVersion = 3

// readableSchema is the oldest schema a read-only open reads as it is
// (schema 3 only added the write-ahead log beside the file).
const readableSchema = 2

const magic = "mcpflow-journal"

var (
	bucketMeta      = []byte("meta")
	bucketRuns      = []byte("runs")
	bucketInvs      = []byte("invocations")
	bucketByRun     = []byte("idx_run")        // run id | invocation id
	bucketByState   = []byte("idx_state")      // state | invocation id
	bucketByTool    = []byte("idx_tool")       // server 0 tool 0 | invocation id
	bucketRunStatus = []byte("idx_run_status") // status | run id

	allBuckets = [][]byte{bucketMeta, bucketRuns, bucketInvs, bucketByRun, bucketByState, bucketByTool, bucketRunStatus}

	keyMagic   = []byte("magic")
	keyVersion = []byte("version")
	keyKeyID   = []byte("keyid")
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
	// committed into the bbolt file in the background (default 20 ms;
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
	// keyOptional lets Compact, which copies pages and decrypts nothing,
	// write an encrypted journal without its key.
	keyOptional bool
	// recovered: a read-only open already applied the log once.
	recovered bool
}

// recoverLog applies the log of the journal at path: a read-write open and
// close (which needs no key: the log holds records as the file stores them).
func recoverLog(path string, o Options) error {
	j, err := Open(path, &Options{LockTimeout: o.LockTimeout, Now: o.Now, keyOptional: true})
	if err != nil {
		return err
	}
	return j.Close()
}

// Journal is an open journal file. It is safe for concurrent use.
type Journal struct {
	writer   // the writes (write.go), committed through update and later
	db       *bolt.DB
	path     string
	readOnly bool
	// keyOptional: see Options.keyOptional.
	keyOptional bool
	// damage is the first damage seen; once set, writes are refused.
	damage atomic.Pointer[error]
	gc     groupCommit[store]
	// The write-ahead log (wal.go), its applier and the records durable
	// in it that may not be in the file yet; nil when read-only.
	log      *wal
	logPath  string
	ap       *applier
	ov       overlay
	durable  atomic.Uint64 // the last entry appended to the log
	logPages atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// Open opens the journal at path. When the file does not exist it is
// created atomically (mode 0600, its directory 0700 when Open creates it):
// a complete empty journal is built in a temporary file beside it, fsynced,
// then linked into place, so a crash never leaves a half-made journal. A
// creation killed after the link leaves its temporary name on the file:
// the next open removes that name (and syncs the directory), as the
// creation would have; any other second name is refused.
//
// An existing file is first validated read-only: its meta pages, its size,
// its free list, the branch pages of every tree (every tree must be a tree;
// about one page in a hundred is read, each once), and the schema marker. A file that is not a journal ([ErrNotJournal]), is
// damaged or truncated ([ErrDamaged]), or has a newer schema
// ([ErrNewerSchema]) is refused and left byte-for-byte untouched. Damage
// inside record pages is found by [Journal.Check]. Opening a valid journal
// of the current schema writes nothing but the writes its log holds beyond
// the file (what a crash left there), which every open applies first — a
// read-only one by opening the journal read-write once — and, on a
// read-write open, a new empty log beside it. An older schema is migrated
// in one transaction (a read-only Open refuses schemas before 2).
//
// A journal held open by another process (or by another Journal of this
// process) makes Open wait up to Options.LockTimeout, then fail with
// [ErrLocked].
func Open(path string, opts *Options) (*Journal, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	logPath := walPath(path) // links resolved once
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if lst, lerr := os.Lstat(path); lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			return nil, fmt.Errorf("open journal %s: %w: it is a symbolic link to %s, which does not exist", path, ErrInaccessible, target)
		}
	}
	var leftover error // why looking for a name a creation left failed
	if err == nil && st.Mode().IsRegular() && hardLinks(st) > 1 {
		// A creation killed after it linked the new file into place left
		// its temporary name on the file: remove it, as the creation would
		// have (another name is the user's, and refused below).
		var removed []string
		real, rerr := filepath.EvalSymlinks(path) // the creation named its temporary file after this
		if rerr == nil {
			removed, rerr = atomicfile.RemoveLinkedLeftovers(real)
		}
		switch {
		case len(removed) > 0 && rerr != nil:
			return nil, fmt.Errorf("open journal %s: %w: removing the name an interrupted creation left: %v", path, ErrInaccessible, rerr)
		case rerr == nil: // the names now (a creation in progress may have removed its own)
			st, err = os.Stat(path)
		default:
			leftover = rerr
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) && o.ReadOnly:
		return nil, fmt.Errorf("open journal %s: %w (no run has been journaled here yet)", path, fs.ErrNotExist)
	case errors.Is(err, fs.ErrNotExist):
		if st, err := os.Stat(logPath); err == nil && st.Size() > 0 {
			return nil, fmt.Errorf("create journal %s: %w: its log %s is there without it (the journal was moved or removed without its log, which may hold writes the journal lacks); put the journal back, or move the log away", path, ErrInaccessible, logPath)
		}
		if err := create(path); err != nil {
			return nil, fmt.Errorf("create journal %s: %w: %v", path, ErrInaccessible, err)
		}
	case err != nil:
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	case st.IsDir():
		return nil, fmt.Errorf("open journal %s: is a directory: %w", path, ErrNotJournal)
	case st.Size() == 0:
		return nil, fmt.Errorf("open journal %s: empty file: %w", path, ErrNotJournal)
	case hardLinks(st) > 1:
		// Its log is found by name: each name would have a log of its own.
		why := ""
		if leftover != nil {
			why = fmt.Sprintf(" (a name that an interrupted creation left could not be removed: %v)", leftover)
		}
		return nil, fmt.Errorf("open journal %s: %w: the file has %d names (hard links), and its log is found by name; keep one name (a symbolic link is fine)%s", path, ErrInaccessible, hardLinks(st), why)
	}
	var db *bolt.DB
	var version uint64
	for range 3 { // again when Compact replaced the file meanwhile
		if version, err = validate(path, o.LockTimeout); err != nil {
			return nil, err
		}
		if db, err = openBolt(path, o.LockTimeout, o.ReadOnly); !errors.Is(err, errReplaced) {
			break
		}
	}
	switch {
	case err != nil:
		return nil, err
	case version < readableSchema && o.ReadOnly:
		db.Close()
		return nil, fmt.Errorf("open journal %s: schema %d must be migrated to %d first: open it read-write once", path, version, SchemaVersion)
	case o.ReadOnly:
		// What a writer that stopped without closing left in the log
		// is applied first, as the next writer would (a read-write
		// open, then this one again).
		n, err := unapplied(db, logPath)
		if err == nil && n > 0 {
			db.Close()
			if o.recovered {
				return nil, fmt.Errorf("open journal %s: %w: its log still holds %d writes after they were applied", path, ErrDamaged, n)
			}
			if err = recoverLog(path, o); err == nil {
				o.recovered = true
				return Open(path, &o)
			}
			if errors.Is(err, ErrDamaged) || errors.Is(err, ErrForeignLog) {
				return nil, err // the read-write open says what is wrong
			}
			return nil, fmt.Errorf("open journal %s: %d writes are in its log %s and not yet in the file (the last process that wrote stopped without closing it); applying them needs the journal read-write: %w", path, n, logPath, err)
		}
		if err != nil {
			db.Close()
			return nil, logError(path, logPath, err)
		}
	}
	j := &Journal{db: db, path: path, logPath: logPath, readOnly: o.ReadOnly, keyOptional: o.keyOptional}
	j.writer = writer{now: o.Now, sealer: newSealer(o.Key), write: j.storeWrite, writeLater: j.later}
	j.gc.init(j.commitLog)
	j.gc.afterCommit = o.AfterCommit
	j.gc.onCommit = o.OnCommit
	if j.sealer != nil {
		sealers.Store(db, j.sealer)
	}
	if !o.ReadOnly {
		idle := o.ApplyIdle
		if idle <= 0 {
			idle = applyIdle
		}
		if err := j.openLog(idle, o.AfterApply); err != nil {
			j.Close()
			return nil, err
		}
	}
	if err := j.checkKey(); err != nil {
		j.Close()
		return nil, err
	}
	if version < SchemaVersion && !o.ReadOnly {
		if err := j.update(func(tx *bolt.Tx) error { return migrate(tx, version) }); err != nil {
			j.Close()
			return nil, fmt.Errorf("open journal %s: migrate schema %d: %w", path, version, err)
		}
	}
	return j, nil
}

// create builds an empty journal in a temporary file in path's directory
// and links it to path. When another process created path meanwhile, its
// file wins and is validated like any existing one.
func create(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Create(path, 0o600, func(f *os.File) error {
		db, err := bolt.Open(f.Name(), 0o600, nil)
		if err != nil {
			return err
		}
		err = db.Update(initialize) // committed and fsynced
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// errReplaced: the file at the path is no longer the one that was opened.
var errReplaced = errors.New("journal file was replaced")

// openBolt opens path with bbolt and makes sure the file it locked is still
// the one at path (Compact replaces the file while holding the old one's
// lock: a process that was waiting for that lock must not use the old file).
func openBolt(path string, timeout time.Duration, readOnly bool) (*bolt.DB, error) {
	var f *os.File
	db, err := boltOpen(path, &bolt.Options{Timeout: timeout, ReadOnly: readOnly,
		OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
			var err error
			f, err = os.OpenFile(name, flag, mode)
			return f, err
		}})
	if err != nil {
		return nil, err
	}
	fst, ferr := f.Stat()
	pst, perr := os.Stat(path)
	if ferr != nil || perr != nil || !os.SameFile(fst, pst) {
		db.Close()
		return nil, fmt.Errorf("open journal %s: %w", path, errReplaced)
	}
	return db, nil
}

func boltOpen(path string, o *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("open journal %s: %w: %v", path, ErrDamaged, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, o)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open journal %s: %w (waited %s; is another mcpflow still running?)", path, ErrLocked, o.Timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("open journal %s: %w", path, ErrNotJournal)
	}
	return nil, openError(path, err)
}

// openError says why bbolt could not open the file: the operating system
// refused it (permissions, a read-only file system, a file that is gone:
// ErrInaccessible, with the reason) or the file's contents are damaged.
// Only the second is damage: an operator told "damaged" might replace a
// good journal.
func openError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		why := pe.Err.Error()
		switch {
		case errors.Is(pe.Err, syscall.EROFS):
			why = "the file system is read-only"
		case errors.Is(pe.Err, fs.ErrPermission):
			why = "permission denied (the journal is private to its owner: check who owns it and its mode)"
		case errors.Is(pe.Err, fs.ErrNotExist):
			why = "the file disappeared"
		}
		return fmt.Errorf("open journal %s: %w: %s", path, ErrInaccessible, why)
	}
	return fmt.Errorf("open journal %s: %w: %v", path, ErrDamaged, err)
}

// validate opens an existing file read-only and checks that it is an intact
// journal of a schema this code understands. It returns the schema version.
// It reads the file's structure with plain reads before bbolt touches any
// page beyond the meta pages, so a damaged file gives an error, not a crash.
func validate(path string, timeout time.Duration) (version uint64, err error) {
	db, err := boltOpen(path, &bolt.Options{Timeout: timeout, ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if err := walkFile(path, db.Info().PageSize, false); err != nil {
		return 0, fmt.Errorf("open journal %s: %w: %v", path, ErrDamaged, err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open journal %s: %w: %v", path, ErrDamaged, r)
		}
	}()
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil || string(meta.Get(keyMagic)) != magic {
			return fmt.Errorf("open journal %s: %w", path, ErrNotJournal)
		}
		v := meta.Get(keyVersion)
		if len(v) != 8 {
			return fmt.Errorf("open journal %s: %w: schema version unreadable", path, ErrDamaged)
		}
		version = binary.BigEndian.Uint64(v)
		if version > SchemaVersion {
			return fmt.Errorf("open journal %s: schema %d, this mcpflow reads up to %d: %w", path, version, SchemaVersion, ErrNewerSchema)
		}
		for _, name := range allBuckets {
			if tx.Bucket(name) == nil {
				return fmt.Errorf("open journal %s: %w: bucket %s missing", path, ErrDamaged, name)
			}
		}
		return nil
	})
	return version, err
}

// initialize creates the buckets and the schema marker of a new journal.
func initialize(tx *bolt.Tx) error {
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if err := meta.Put(keyMagic, []byte(magic)); err != nil {
		return err
	}
	return meta.Put(keyVersion, binary.BigEndian.AppendUint64(nil, SchemaVersion))
}

// migrate upgrades a journal written with schema version from. Each future
// schema change adds a step here (from n to n+1, in the same transaction)
// and bumps SchemaVersion.
func migrate(tx *bolt.Tx, from uint64) error {
	if from == 1 {
		// Schema 2 seals every run and invocation record with a checksum.
		for _, name := range [][]byte{bucketRuns, bucketInvs} {
			b := tx.Bucket(name)
			type kv struct{ k, v []byte }
			var all []kv
			if err := b.ForEach(func(k, v []byte) error {
				if !json.Valid(v) {
					return fmt.Errorf("%s record %x: %w: not JSON", name, k, ErrDamaged)
				}
				all = append(all, kv{bytes.Clone(k), seal(bytes.Clone(v))})
				return nil
			}); err != nil {
				return err
			}
			for _, e := range all {
				if err := b.Put(e.k, e.v); err != nil {
					return err
				}
			}
		}
		from = 2
	}
	if from == 2 {
		// Schema 3 has a write-ahead log beside the file (wal.go); the
		// version keeps older mcpflow, which would not apply it, out.
		from = 3
	}
	if from == SchemaVersion {
		return tx.Bucket(bucketMeta).Put(keyVersion, binary.BigEndian.AppendUint64(nil, SchemaVersion))
	}
	return fmt.Errorf("no migration from schema %d to %d", from, SchemaVersion)
}

// view runs fn in a read transaction. A damaged page that makes bbolt
// panic or fault gives ErrDamaged instead.
func (j *Journal) view(fn func(*bolt.Tx) error) (err error) {
	if err := j.caughtUp(); err != nil {
		return err
	}
	return j.viewNow(fn)
}

// viewNow is view without waiting for the log to be applied: for reads
// that looked in the overlay first.
func (j *Journal) viewNow(fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("journal %s: %w: %v", j.path, ErrDamaged, r)
		}
	}()
	err = j.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	j.latch(err)
	return err
}

// update commits fn straight into the file, once what the log holds is
// applied, while no other write can commit (migrations, the key, Prune).
// Once damage has been seen in this journal — by a read, a write or Check
// — every write is refused, so that nothing is built on a record that
// cannot be read: salvage what is readable into a new journal instead.
func (j *Journal) update(fn func(*bolt.Tx) error) error {
	if err := j.refused(); err != nil {
		return err
	}
	err := j.direct(fn)
	j.latch(err)
	return err
}

// direct commits fn straight into the file, once the log is applied and
// with no group commit in progress.
func (j *Journal) direct(fn func(*bolt.Tx) error) error {
	return j.gc.exclusive(func() error {
		if err := j.caughtUp(); err != nil {
			return err
		}
		j.ov.drop(j.durable.Load())
		_, err := applyBolt(j.db, j.path, []func(*bolt.Tx) error{fn})
		return err
	})
}

// caughtUp waits until every write that returned is in the file.
func (j *Journal) caughtUp() error {
	if j.ap == nil {
		return nil
	}
	return j.ap.wait(j.durable.Load())
}

// applyBolt runs fns in one bbolt transaction: groupCommit.apply. It returns the index of the write
// that failed (or -1 when the commit itself failed or succeeded). A panic
// inside bbolt (a damaged page) is that write's error, not the process's end.
func applyBolt(db *bolt.DB, path string, fns []func(*bolt.Tx) error) (failed int, err error) {
	cur := -1
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			failed, err = cur, fmt.Errorf("journal %s: %w: %v", path, ErrDamaged, r)
		}
	}()
	err = db.Update(func(tx *bolt.Tx) error {
		for i, fn := range fns {
			cur = i
			if err := fn(tx); err != nil {
				return err
			}
		}
		cur = -1
		return nil
	})
	switch {
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return -1, ErrClosed
	case errors.Is(err, berrors.ErrDatabaseReadOnly):
		return -1, fmt.Errorf("journal %s was opened read-only: %w", path, err)
	}
	return cur, err
}

// storeWrite runs fn in a group commit: durable in the log when it
// returns nil.
func (j *Journal) storeWrite(fn func(store) error) error {
	if err := j.refused(); err != nil {
		return err
	}
	err := j.gc.do(fn)
	j.latch(err)
	return err
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

// Done reports whether the write is committed or failed, without waiting.
func (p *Pending) Done() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// later queues fn for the next commit.
func (j *Journal) later(fn func(store) error) (*Pending, error) {
	if err := j.refused(); err != nil {
		return nil, err
	}
	w, err := j.gc.enqueue(fn)
	if err != nil {
		return nil, err
	}
	return &Pending{wait: func() error {
		err := j.gc.wait(w)
		j.latch(err)
		return err
	}, done: w.done}, nil
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

// Stats returns the journal's write counts.
func (j *Journal) Stats() Stats {
	db := j.db.Stats()
	st := Stats{Commits: j.gc.commits.Load(), Writes: j.gc.writes.Load(),
		Pages: db.TxStats.GetWrite() + j.logPages.Load()}
	if j.ap != nil {
		a := j.ap.stats()
		st.Log, st.Applies, st.Unapplied, st.ApplyErr = true, a.commits, int64(a.unapplied), a.err
		st.LogSync = time.Duration(j.log.synced.Load())
	}
	return st
}

// refused is the error of every write once damage was found.
func (j *Journal) refused() error {
	if d := j.damage.Load(); d != nil {
		return fmt.Errorf("journal %s: %w: writes refused since damage was found (%v); salvage copies what is readable into a new journal", j.path, ErrDamaged, *d)
	}
	return nil
}

// latch remembers damage that err reports.
func (j *Journal) latch(err error) {
	if errors.Is(err, ErrDamaged) {
		e := err // on the heap only here: every write calls latch
		j.damage.CompareAndSwap(nil, &e)
	}
}

// Path returns the file's path.
func (j *Journal) Path() string { return j.path }

// Close releases the file. It waits for a commit in progress; writes after
// Close return ErrClosed. It is idempotent.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		j.gc.close()
		var apErr, logErr error
		if j.ap != nil {
			apErr = j.ap.close()
			logErr = j.log.close()
		}
		j.ov.clear()
		sealers.Delete(j.db)
		j.closeErr = errors.Join(apErr, j.db.Close(), logErr)
	})
	return j.closeErr
}

// checkKey compares the key the journal was opened with to the one it
// records, and records it on the first read-write open with a key.
func (j *Journal) checkKey() error {
	var recorded string
	if err := j.view(func(tx *bolt.Tx) error {
		recorded = string(tx.Bucket(bucketMeta).Get(keyKeyID))
		return nil
	}); err != nil {
		return err
	}
	switch {
	case j.sealer == nil && recorded != "" && !j.readOnly && !j.keyOptional:
		return fmt.Errorf("open journal %s: %w: its payloads are encrypted with key %s (set %s, or keep the key file in your config directory)", j.path, ErrKeyRequired, recorded, KeyEnv)
	case j.sealer == nil:
		return nil
	case recorded == "" && !j.readOnly:
		return j.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyKeyID, []byte(j.sealer.id)) })
	case recorded != "" && recorded != j.sealer.id:
		return fmt.Errorf("open journal %s: %w: it records key %s, this key is %s", j.path, ErrWrongKey, recorded, j.sealer.id)
	}
	return nil
}
