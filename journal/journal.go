package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the version of the record layout this code writes.
// Migrations from older versions run in [migrate].
const SchemaVersion = 1

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
)

// Options configures Open. A nil *Options means the defaults.
type Options struct {
	// LockTimeout is how long Open waits for another process to release the
	// file before returning ErrLocked. Default 1s.
	LockTimeout time.Duration
	// ReadOnly opens the journal for reading only; it shares the file with
	// other readers.
	ReadOnly bool
	// Now is the clock used for timestamps. Default time.Now.
	Now func() time.Time
}

// Journal is an open journal file. It is safe for concurrent use.
type Journal struct {
	db   *bolt.DB
	path string
	now  func() time.Time
	gc   groupCommit

	closeOnce sync.Once
	closeErr  error
}

// Open opens the journal at path, creating it (mode 0600, its directory 0700)
// when it does not exist. An existing file is first validated read-only: a
// file that is not a journal, is damaged, or has a newer schema is refused
// and left untouched.
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
	st, err := os.Stat(path)
	exists := err == nil
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	case exists && st.IsDir():
		return nil, fmt.Errorf("open journal %s: is a directory: %w", path, ErrNotJournal)
	case exists && st.Size() > 0:
		if err := validate(path, o.LockTimeout); err != nil {
			return nil, err
		}
	case !exists && o.ReadOnly:
		return nil, fmt.Errorf("open journal %s: %w (no run has been journaled here yet)", path, fs.ErrNotExist)
	case !exists:
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("create journal directory: %w", err)
		}
	}
	db, err := openBolt(path, o.LockTimeout, o.ReadOnly)
	if err != nil {
		return nil, err
	}
	j := &Journal{db: db, path: path, now: o.Now}
	j.gc.db = db
	if !o.ReadOnly {
		if err := db.Update(initialize); err != nil {
			db.Close()
			return nil, fmt.Errorf("open journal %s: %w", path, err)
		}
	}
	return j, nil
}

func openBolt(path string, timeout time.Duration, readOnly bool) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("open journal %s: %w: %v", path, ErrDamaged, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: readOnly})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open journal %s: %w (waited %s; is another mcpflow still running?)", path, ErrLocked, timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("open journal %s: %w", path, ErrNotJournal)
	default:
		return nil, fmt.Errorf("open journal %s: %w: %v", path, ErrDamaged, err)
	}
}

// validate opens an existing file read-only and checks that it is an
// intact journal of a schema this code understands.
func validate(path string, timeout time.Duration) (err error) {
	db, err := openBolt(path, timeout, true)
	if err != nil {
		return err
	}
	defer db.Close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open journal %s: %w: %v", path, ErrDamaged, r)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if empty {
				return nil // a fresh bbolt file with nothing in it yet
			}
			return fmt.Errorf("open journal %s: %w", path, ErrNotJournal)
		}
		if string(meta.Get(keyMagic)) != magic {
			return fmt.Errorf("open journal %s: %w", path, ErrNotJournal)
		}
		v := meta.Get(keyVersion)
		if len(v) != 8 {
			return fmt.Errorf("open journal %s: %w: schema version unreadable", path, ErrDamaged)
		}
		if n := binary.BigEndian.Uint64(v); n > SchemaVersion {
			return fmt.Errorf("open journal %s: schema %d, this mcpflow reads up to %d: %w", path, n, SchemaVersion, ErrNewerSchema)
		}
		return nil
	})
}

// initialize creates the buckets and the schema marker, and migrates older
// schemas.
func initialize(tx *bolt.Tx) error {
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if meta.Get(keyMagic) == nil {
		if err := meta.Put(keyMagic, []byte(magic)); err != nil {
			return err
		}
		return meta.Put(keyVersion, binary.BigEndian.AppendUint64(nil, SchemaVersion))
	}
	return migrate(tx, binary.BigEndian.Uint64(meta.Get(keyVersion)))
}

// migrate upgrades a journal written with schema version from. Each future
// schema change adds a step here and bumps SchemaVersion.
func migrate(tx *bolt.Tx, from uint64) error {
	if from == SchemaVersion {
		return nil
	}
	return fmt.Errorf("no migration from schema %d to %d", from, SchemaVersion)
}

// Path returns the file's path.
func (j *Journal) Path() string { return j.path }

// Close releases the file. It is idempotent; writes after Close return ErrClosed.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		j.gc.close()
		j.closeErr = j.db.Close()
	})
	return j.closeErr
}
