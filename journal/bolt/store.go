package bolt

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

	"github.com/mcpflow/mcpflow/internal/atomicfile"
	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
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

// openFlags are the settings of an open that only this package makes.
type openFlags struct {
	// keyOptional lets Compact, which copies pages and decrypts nothing,
	// write an encrypted journal without its key.
	keyOptional bool
	// recovered: a read-only open already applied the log once.
	recovered bool
}

// recoverLog applies the log of the journal at path: a read-write open and
// close (which needs no key: the log holds records as the file stores them).
func recoverLog(path string, o journal.Options) error {
	j, err := open(path, &journal.Options{LockTimeout: o.LockTimeout, Now: o.Now}, openFlags{keyOptional: true})
	if err != nil {
		return err
	}
	return j.Close()
}

// Store is an open journal file. It is safe for concurrent use.
type Store struct {
	journal.Writer                 // the writes (write.go), committed through update and later
	sealer         *journal.Sealer // the writer's: nil when payloads are stored as given
	db             *bbolt.DB
	path           string
	readOnly       bool
	// keyOptional: see openFlags.keyOptional.
	keyOptional bool
	// damage is the first damage seen; once set, writes are refused.
	damage atomic.Pointer[error]
	gc     journal.GroupCommit[journal.Tx]
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
// inside record pages is found by [Store.Check]. Opening a valid journal
// of the current schema writes nothing but the writes its log holds beyond
// the file (what a crash left there), which every open applies first — a
// read-only one by opening the journal read-write once — and, on a
// read-write open, a new empty log beside it. An older schema is migrated
// in one transaction (a read-only Open refuses schemas before 2).
//
// A journal held open by another process (or by another Journal of this
// process) makes Open wait up to Options.LockTimeout, then fail with
// [ErrLocked].
func Open(path string, opts *journal.Options) (*Store, error) { return open(path, opts, openFlags{}) }

func open(path string, opts *journal.Options, f openFlags) (*Store, error) {
	var o journal.Options
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
			return nil, fmt.Errorf("open journal %s: %w: it is a symbolic link to %s, which does not exist", path, journal.ErrInaccessible, target)
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
			return nil, fmt.Errorf("open journal %s: %w: removing the name an interrupted creation left: %v", path, journal.ErrInaccessible, rerr)
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
			return nil, fmt.Errorf("create journal %s: %w: its log %s is there without it (the journal was moved or removed without its log, which may hold writes the journal lacks); put the journal back, or move the log away", path, journal.ErrInaccessible, logPath)
		}
		if err := create(path); err != nil {
			return nil, fmt.Errorf("create journal %s: %w: %v", path, journal.ErrInaccessible, err)
		}
	case err != nil:
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	case st.IsDir():
		return nil, fmt.Errorf("open journal %s: is a directory: %w", path, journal.ErrNotJournal)
	case st.Size() == 0:
		return nil, fmt.Errorf("open journal %s: empty file: %w", path, journal.ErrNotJournal)
	case hardLinks(st) > 1:
		// Its log is found by name: each name would have a log of its own.
		why := ""
		if leftover != nil {
			why = fmt.Sprintf(" (a name that an interrupted creation left could not be removed: %v)", leftover)
		}
		return nil, fmt.Errorf("open journal %s: %w: the file has %d names (hard links), and its log is found by name; keep one name (a symbolic link is fine)%s", path, journal.ErrInaccessible, hardLinks(st), why)
	}
	var db *bbolt.DB
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
			if f.recovered {
				return nil, fmt.Errorf("open journal %s: %w: its log still holds %d writes after they were applied", path, journal.ErrDamaged, n)
			}
			if err = recoverLog(path, o); err == nil {
				f.recovered = true
				return open(path, &o, f)
			}
			if errors.Is(err, journal.ErrDamaged) || errors.Is(err, journal.ErrForeignLog) {
				return nil, err // the read-write open says what is wrong
			}
			return nil, fmt.Errorf("open journal %s: %d writes are in its log %s and not yet in the file (the last process that wrote stopped without closing it); applying them needs the journal read-write: %w", path, n, logPath, err)
		}
		if err != nil {
			db.Close()
			return nil, logError(path, logPath, err)
		}
	}
	j := &Store{db: db, path: path, logPath: logPath, readOnly: o.ReadOnly, keyOptional: f.keyOptional}
	j.sealer = journal.NewSealer(o.Key)
	j.Writer = journal.NewWriter(o.Now, j.sealer, j.storeWrite, j.later)
	j.gc.Init(j.commitLog)
	j.gc.AfterCommit = o.AfterCommit
	j.gc.OnCommit = o.OnCommit
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
		if err := j.update(func(tx *bbolt.Tx) error { return migrate(tx, version) }); err != nil {
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
		db, err := bbolt.Open(f.Name(), 0o600, nil)
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
func openBolt(path string, timeout time.Duration, readOnly bool) (*bbolt.DB, error) {
	var f *os.File
	db, err := boltOpen(path, &bbolt.Options{Timeout: timeout, ReadOnly: readOnly,
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

func boltOpen(path string, o *bbolt.Options) (db *bbolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("open journal %s: %w: %v", path, journal.ErrDamaged, r)
		}
	}()
	db, err = bbolt.Open(path, 0o600, o)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open journal %s: %w (waited %s; is another mcpflow still running?)", path, journal.ErrLocked, o.Timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("open journal %s: %w", path, journal.ErrNotJournal)
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
		return fmt.Errorf("open journal %s: %w: %s", path, journal.ErrInaccessible, why)
	}
	return fmt.Errorf("open journal %s: %w: %v", path, journal.ErrDamaged, err)
}

// validate opens an existing file read-only and checks that it is an intact
// journal of a schema this code understands. It returns the schema version.
// It reads the file's structure with plain reads before bbolt touches any
// page beyond the meta pages, so a damaged file gives an error, not a crash.
func validate(path string, timeout time.Duration) (version uint64, err error) {
	db, err := boltOpen(path, &bbolt.Options{Timeout: timeout, ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if err := walkFile(path, db.Info().PageSize, false); err != nil {
		return 0, fmt.Errorf("open journal %s: %w: %v", path, journal.ErrDamaged, err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open journal %s: %w: %v", path, journal.ErrDamaged, r)
		}
	}()
	err = db.View(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil || string(meta.Get(keyMagic)) != magic {
			return fmt.Errorf("open journal %s: %w", path, journal.ErrNotJournal)
		}
		v := meta.Get(keyVersion)
		if len(v) != 8 {
			return fmt.Errorf("open journal %s: %w: schema version unreadable", path, journal.ErrDamaged)
		}
		version = binary.BigEndian.Uint64(v)
		if version > SchemaVersion {
			return fmt.Errorf("open journal %s: schema %d, this mcpflow reads up to %d: %w", path, version, SchemaVersion, journal.ErrNewerSchema)
		}
		for _, name := range allBuckets {
			if tx.Bucket(name) == nil {
				return fmt.Errorf("open journal %s: %w: bucket %s missing", path, journal.ErrDamaged, name)
			}
		}
		return nil
	})
	return version, err
}

// initialize creates the buckets and the schema marker of a new journal.
func initialize(tx *bbolt.Tx) error {
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
func migrate(tx *bbolt.Tx, from uint64) error {
	if from == 1 {
		// Schema 2 seals every run and invocation record with a checksum.
		for _, name := range [][]byte{bucketRuns, bucketInvs} {
			b := tx.Bucket(name)
			type kv struct{ k, v []byte }
			var all []kv
			if err := b.ForEach(func(k, v []byte) error {
				if !json.Valid(v) {
					return fmt.Errorf("%s record %x: %w: not JSON", name, k, journal.ErrDamaged)
				}
				all = append(all, kv{bytes.Clone(k), journal.AddChecksum(bytes.Clone(v))})
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
func (j *Store) view(fn func(*bbolt.Tx) error) (err error) {
	if err := j.caughtUp(); err != nil {
		return err
	}
	return j.viewNow(fn)
}

// viewNow is view without waiting for the log to be applied: for reads
// that looked in the overlay first.
func (j *Store) viewNow(fn func(*bbolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("journal %s: %w: %v", j.path, journal.ErrDamaged, r)
		}
	}()
	err = j.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = journal.ErrClosed
	}
	j.latch(err)
	return err
}

// update commits fn straight into the file, once what the log holds is
// applied, while no other write can commit (migrations, the key, Prune).
// Once damage has been seen in this journal — by a read, a write or Check
// — every write is refused, so that nothing is built on a record that
// cannot be read: salvage what is readable into a new journal instead.
func (j *Store) update(fn func(*bbolt.Tx) error) error {
	if err := j.refused(); err != nil {
		return err
	}
	err := j.direct(fn)
	j.latch(err)
	return err
}

// direct commits fn straight into the file, once the log is applied and
// with no group commit in progress.
func (j *Store) direct(fn func(*bbolt.Tx) error) error {
	return j.gc.Exclusive(func() error {
		if err := j.caughtUp(); err != nil {
			return err
		}
		j.ov.drop(j.durable.Load())
		_, err := applyBolt(j.db, j.path, []func(*bbolt.Tx) error{fn})
		return err
	})
}

// caughtUp waits until every write that returned is in the file.
func (j *Store) caughtUp() error {
	if j.ap == nil {
		return nil
	}
	return j.ap.wait(j.durable.Load())
}

// applyBolt runs fns in one bbolt transaction: groupCommit.apply. It returns the index of the write
// that failed (or -1 when the commit itself failed or succeeded). A panic
// inside bbolt (a damaged page) is that write's error, not the process's end.
func applyBolt(db *bbolt.DB, path string, fns []func(*bbolt.Tx) error) (failed int, err error) {
	cur := -1
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			failed, err = cur, fmt.Errorf("journal %s: %w: %v", path, journal.ErrDamaged, r)
		}
	}()
	err = db.Update(func(tx *bbolt.Tx) error {
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
		return -1, journal.ErrClosed
	case errors.Is(err, berrors.ErrDatabaseReadOnly):
		return -1, fmt.Errorf("journal %s was opened read-only: %w", path, err)
	}
	return cur, err
}

// storeWrite runs fn in a group commit: durable in the log when it
// returns nil.
func (j *Store) storeWrite(fn func(journal.Tx) error) error {
	if err := j.refused(); err != nil {
		return err
	}
	err := j.gc.Do(fn)
	j.latch(err)
	return err
}

// later queues fn for the next commit.
func (j *Store) later(fn func(journal.Tx) error) (*journal.Pending, error) {
	if err := j.refused(); err != nil {
		return nil, err
	}
	return j.gc.Later(fn, j.latch)
}

// Stats returns the journal's write counts.
func (j *Store) Stats() journal.Stats {
	db := j.db.Stats()
	st := journal.Stats{Commits: j.gc.Commits.Load(), Writes: j.gc.Writes.Load(),
		Pages: db.TxStats.GetWrite() + j.logPages.Load()}
	if j.ap != nil {
		a := j.ap.stats()
		st.Log, st.Applies, st.Unapplied, st.ApplyErr = true, a.commits, int64(a.unapplied), a.err
		st.LogSync = time.Duration(j.log.synced.Load())
	}
	return st
}

// refused is the error of every write once damage was found.
func (j *Store) refused() error {
	if d := j.damage.Load(); d != nil {
		return fmt.Errorf("journal %s: %w: writes refused since damage was found (%v); salvage copies what is readable into a new journal", j.path, journal.ErrDamaged, *d)
	}
	return nil
}

// latch remembers damage that err reports.
func (j *Store) latch(err error) {
	if errors.Is(err, journal.ErrDamaged) {
		e := err // on the heap only here: every write calls latch
		j.damage.CompareAndSwap(nil, &e)
	}
}

// Path returns the file's path.
func (j *Store) Path() string { return j.path }

// Close releases the file. It waits for a commit in progress; writes after
// Close return ErrClosed. It is idempotent.
func (j *Store) Close() error {
	j.closeOnce.Do(func() {
		j.gc.Close()
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
func (j *Store) checkKey() error {
	var recorded string
	if err := j.view(func(tx *bbolt.Tx) error {
		recorded = string(tx.Bucket(bucketMeta).Get(keyKeyID))
		return nil
	}); err != nil {
		return err
	}
	switch {
	case j.sealer == nil && recorded != "" && !j.readOnly && !j.keyOptional:
		return fmt.Errorf("open journal %s: %w: its payloads are encrypted with key %s (set %s, or keep the key file in your config directory)", j.path, journal.ErrKeyRequired, recorded, journal.KeyEnv)
	case j.sealer == nil:
		return nil
	case recorded == "" && !j.readOnly:
		return j.update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyKeyID, []byte(j.sealer.KeyID)) })
	case recorded != "" && recorded != j.sealer.KeyID:
		return fmt.Errorf("open journal %s: %w: it records key %s, this key is %s", j.path, journal.ErrWrongKey, recorded, j.sealer.KeyID)
	}
	return nil
}

var _ journal.Store = (*Store)(nil)
