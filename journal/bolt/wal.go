package bolt

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// walCRC is CRC-32C (Castagnoli), which CPUs compute in hardware.
var walCRC = crc32.MakeTable(crc32.Castagnoli)

const (
	walMagic    = 0x6c77666d // "mfwl"
	walHeader   = 32         // magic, length, sequence number, journal id, CRC-32C, zero
	walCapacity = 4 << 20    // reuse the log from its start beyond this (1,024 commits of a block)
	walGrow     = 64 << 10   // the log grows by this much, written as zeros, so that appends overwrite
	// walAlign: every entry starts on a block of its own, so that an
	// append never rewrites a block that holds an acknowledged entry (a
	// write torn by a power cut can only damage the entry being written).
	walAlign = 4096
)

// walNext is where the entry after the one at off, whose body is n
// bytes, starts.
func walNext(off, n int) int { return (off + walHeader + n + walAlign - 1) / walAlign * walAlign }

var (
	keyWALApplied = []byte("wal_applied")
	// keyWALID is the journal's identity, which every entry of its log
	// carries: a log beside a journal that is not its own (the journal
	// was replaced, or moved without its log) is refused, not applied.
	keyWALID = []byte("wal_id")
)

// Record kinds in the log.
const (
	recRun byte = 'r'
	recInv byte = 'i'
)

// walRecord is one record put: its bytes as bbolt stores them, and what
// its index entries need (the state or status it leaves and enters, and
// for a new invocation its run, server and tool).
type walRecord struct {
	kind         byte
	isNew        bool
	old, new     byte // RunStatus or State
	id, run      journal.ID
	server, tool string
	val          []byte
	// obj is the invocation as put (see ownInv), which the writes read
	// instead of decoding val; nil for runs (read a few times a run) and
	// for records read back from the log.
	obj any
}

// runRecord is the log record of putting r over old (nil when new).
func runRecord(s *journal.Sealer, old, r *journal.Run) (*walRecord, error) {
	b, err := journal.EncodeRun(s, r)
	if err != nil {
		return nil, err
	}
	rec := &walRecord{kind: recRun, isNew: old == nil, new: byte(r.Status), id: r.ID, run: r.ID, val: journal.AddChecksum(b)}
	if old != nil {
		rec.old = byte(old.Status)
	}
	return rec, nil
}

// invRecord is the log record of putting inv over old (nil when new).
func invRecord(s *journal.Sealer, old, inv *journal.Invocation) (*walRecord, error) {
	b, err := journal.EncodeInvocation(s, inv)
	if err != nil {
		return nil, err
	}
	rec := &walRecord{kind: recInv, isNew: old == nil, new: byte(inv.State), id: inv.ID, run: inv.RunID,
		server: inv.Server, tool: inv.Tool, val: journal.AddChecksum(b), obj: ownInv(inv)}
	if old != nil {
		rec.old = byte(old.State)
	}
	return rec, nil
}

// ownInv is a copy of inv that shares nothing a caller could change
// afterwards (the payloads it passed in, the result it was given).
func ownInv(inv *journal.Invocation) *journal.Invocation {
	c := journal.CloneInvocation(inv)
	c.Arguments, c.Annotations = bytes.Clone(inv.Arguments), bytes.Clone(inv.Annotations)
	if inv.Result != nil {
		r := *inv.Result
		r.Content, r.StructuredContent = bytes.Clone(r.Content), bytes.Clone(r.StructuredContent)
		c.Result = &r
	}
	if inv.Error != nil {
		e := *inv.Error
		c.Error = &e
	}
	return c
}

// check refuses a record that the file could not take (bbolt's limits
// on a key and a value): it must be refused before it is in the log, not
// when the log is applied.
func (r *walRecord) check() error {
	if r.kind == recInv && r.isNew && len(toolKey(r.server, r.tool, r.id)) > bbolt.MaxKeySize {
		return fmt.Errorf("invocation %s: server and tool names of %d bytes: %w", r.id.Short(), len(r.server)+len(r.tool), berrors.ErrKeyTooLarge)
	}
	if len(r.val) > bbolt.MaxValueSize {
		return fmt.Errorf("record %s of %d bytes: %w", r.id.Short(), len(r.val), berrors.ErrValueTooLarge)
	}
	return nil
}

// apply writes the record and moves its index entries.
func (r *walRecord) apply(tx *bbolt.Tx) error {
	switch r.kind {
	case recRun:
		idx := tx.Bucket(bucketRunStatus)
		if !r.isNew {
			if err := idx.Delete(runStatusKey(journal.RunStatus(r.old), r.id)); err != nil {
				return err
			}
		}
		if err := idx.Put(runStatusKey(journal.RunStatus(r.new), r.id), nil); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Put(r.id.Bytes(), r.val)
	case recInv:
		states := tx.Bucket(bucketByState)
		if r.isNew {
			if err := tx.Bucket(bucketByRun).Put(cat(r.run.Bytes(), r.id.Bytes()), nil); err != nil {
				return err
			}
			if err := tx.Bucket(bucketByTool).Put(toolKey(r.server, r.tool, r.id), nil); err != nil {
				return err
			}
		} else if err := states.Delete(stateKey(journal.State(r.old), r.id)); err != nil { // a no-op when absent
			return err
		}
		if indexed(journal.State(r.new)) {
			if err := states.Put(stateKey(journal.State(r.new), r.id), nil); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketInvs).Put(r.id.Bytes(), r.val)
	}
	return fmt.Errorf("%w: log record of unknown kind %d", journal.ErrDamaged, r.kind)
}

func (r *walRecord) appendTo(b []byte) []byte {
	flags := byte(0)
	if r.isNew {
		flags = 1
	}
	b = append(b, r.kind, flags, r.old, r.new)
	b = append(b, r.id[:]...)
	b = append(b, r.run[:]...)
	for _, s := range []string{r.server, r.tool} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.val)))
	return append(b, r.val...)
}

// decodeRecords reads the records of one log entry.
func decodeRecords(p []byte) ([]*walRecord, error) {
	bad := fmt.Errorf("%w: log entry cut short", journal.ErrDamaged)
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < n {
			return nil, false
		}
		f := p[k : k+int(n)]
		p = p[k+int(n):]
		return f, true
	}
	var recs []*walRecord
	for len(p) > 0 {
		if len(p) < 36 {
			return nil, bad
		}
		r := &walRecord{kind: p[0], isNew: p[1] == 1, old: p[2], new: p[3]}
		copy(r.id[:], p[4:20])
		copy(r.run[:], p[20:36])
		p = p[36:]
		server, ok1 := field()
		tool, ok2 := field()
		val, ok3 := field()
		if !ok1 || !ok2 || !ok3 {
			return nil, bad
		}
		r.server, r.tool, r.val = string(server), string(tool), val
		if r.kind != recRun && r.kind != recInv {
			return nil, fmt.Errorf("%w: log record of unknown kind %d", journal.ErrDamaged, r.kind)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// walEntry is one durable entry of the log: the records of one commit.
type walEntry struct {
	seq  uint64
	recs []*walRecord
	size int // its bytes in the log
}

// wal is the log file of a journal open read-write. Only the committer
// (the holder of the group commit's token) appends.
type wal struct {
	f    *os.File
	path string
	off  int64  // where the next entry goes
	size int64  // the file's size
	seq  uint64 // the sequence number of the last entry written
	id   []byte // the journal's id (keyWALID)
	buf  []byte
	// synced is the time spent in fdatasync, in nanoseconds (Stats
	// reads it while appends go on).
	synced atomic.Int64
	// err is sticky: after a failed write the log's end is unknown, so
	// nothing more is appended until the journal is opened again.
	err error
}

// walPath is the log's path beside the journal file at path (links
// resolved: one file, one log, whatever name it is opened by).
func walPath(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return path + "-wal"
}

// openWAL opens (or creates, private to its owner) the log of the journal
// at path for appending.
func openWAL(p string) (*wal, error) {
	if st, err := os.Lstat(p); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("open journal log %s: %w: not a regular file", p, journal.ErrInaccessible)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal log %s: %w: %v", p, journal.ErrInaccessible, err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err == nil && st.Size() == 0 {
		// A new log: its directory entry must be durable before anything
		// relies on what is appended to it.
		err = syncDir(filepath.Dir(p))
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open journal log %s: %w: %v", p, journal.ErrInaccessible, err)
	}
	return &wal{f: f, path: p, size: st.Size()}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// entry encodes the next entry (sequence w.seq+1) of recs into w.buf.
func (w *wal) entry(recs []*walRecord) []byte {
	b := append(w.buf[:0], make([]byte, walHeader)...)
	for _, r := range recs {
		b = r.appendTo(b)
	}
	binary.LittleEndian.PutUint32(b[0:], walMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-walHeader))
	binary.LittleEndian.PutUint64(b[8:], w.seq+1)
	copy(b[16:24], w.id)
	crc := crc32.Update(crc32.Checksum(b[4:24], walCRC), walCRC, b[walHeader:])
	binary.LittleEndian.PutUint32(b[24:], crc)
	b = append(b, make([]byte, walNext(0, len(b)-walHeader)-len(b))...) // to the next block
	w.buf = b
	return b
}

// fits reports whether an entry of n bytes goes at the end of the log;
// when it does not, the log must be reused from its start, once what it
// holds is applied.
func (w *wal) fits(n int) bool { return w.off == 0 || w.off+int64(n) <= walCapacity }

// write appends entry (made by w.entry) and syncs it: when it returns nil
// the entry is durable. It returns the number of pages written.
func (w *wal) write(entry []byte) (pages int64, err error) {
	if w.err != nil {
		return 0, w.err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("journal log %s: %w", w.path, err)
			w.err = err
		}
	}()
	end := w.off + int64(len(entry))
	if end > w.size {
		// Grow with zeros written (not a sparse hole): later appends
		// overwrite allocated blocks, and their sync is one flush.
		size := (end + walGrow - 1) / walGrow * walGrow
		if _, err := w.f.WriteAt(make([]byte, size-w.size), w.size); err != nil {
			return 0, err
		}
		pages += (size - w.size) / 4096
		w.size = size
	}
	if _, err := w.f.WriteAt(entry, w.off); err != nil {
		return 0, err
	}
	start := time.Now()
	err = fdatasync(w.f)
	w.synced.Add(int64(time.Since(start)))
	if err != nil {
		// The entry may be whole in the page cache: unmark it, so that
		// an open before the machine restarts does not apply a write
		// whose caller was told it failed.
		w.f.WriteAt(make([]byte, 4), w.off)
		return 0, err
	}
	w.off = end
	w.seq++
	return pages + int64(len(entry)+4095)/4096, nil
}

// rewind makes the next entry go at the log's start (everything in it
// must be applied). A log that a large entry grew well past its capacity
// is cut back.
func (w *wal) rewind() {
	w.off = 0
	if w.size > 2*walCapacity && w.f.Truncate(walCapacity) == nil {
		w.size = walCapacity
	}
}

func (w *wal) close() error { return w.f.Close() }

// walMaxRead bounds the log Open reads into memory: a larger file is not
// a log (the log is cut back to walCapacity; only an entry larger than
// that grows it).
const walMaxRead = 256 << 20

// readWAL returns the entries of the log of the journal whose id is id
// after applied, in order, and the highest sequence number of any entry
// of the journal in the log (0 when none): the next entry's number must be
// above it. Entries after applied must follow it without a gap. Where
// the entry after the last one read belongs, an entry that cannot be read
// (a torn append) or an older one (what is left of older entries after a
// reuse of the log) is the end of the log, unless an intact entry of the
// journal with a higher number is there or comes after it: then, when
// every entry in between is applied already, reading goes on from there;
// otherwise the log is damaged. A log that is not this journal's —
// a file that is not a log, or entries of another journal (of any journal,
// when id is nil: this journal never had a log) — is refused.
func readWAL(r io.ReaderAt, size int64, applied uint64, id []byte) (entries []walEntry, highest uint64, err error) {
	if size > walMaxRead {
		return nil, 0, fmt.Errorf("%w: a file of %d bytes is not a journal log", journal.ErrForeignLog, size)
	}
	data := make([]byte, size)
	if _, err := r.ReadAt(data, 0); err != nil && err != io.EOF {
		return nil, 0, err
	}
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], walMagic)
	if head := data[:min(len(data), walHeader)]; !bytes.HasPrefix(head, magic[:min(len(head), 4)]) && bytes.ContainsFunc(head, func(r rune) bool { return r != 0 }) {
		return nil, 0, fmt.Errorf("%w: it is not a journal log at all", journal.ErrForeignLog)
	}
	for off := 0; off+walHeader <= len(data); off += walAlign {
		if seq, eid, _, ok := walEntryAt(data, off); ok {
			if !bytes.Equal(eid, id) {
				return nil, 0, fmt.Errorf("%w: it is another journal's (this journal replaced that one, or that one was moved without its log)", journal.ErrForeignLog)
			}
			highest = max(highest, seq)
		}
	}
	var last uint64 // the entry just read, 0 before the first
	for off := 0; ; {
		seq, _, p, ok := walEntryAt(data, off)
		if !ok || (off > 0 && seq != last+1) {
			// Not the entry after last: a torn append, what is left of
			// older entries after a reuse — or damage, when an intact
			// entry after last comes here or later.
			from := max(last, applied) // the entries after it are missing here
			if off > 0 {
				from = last
			}
			nextOff, next := walEntryAfter(data, off, max(last, applied), id)
			switch {
			case next == 0:
				return entries, highest, nil // the end
			case next-1 > applied:
				return nil, 0, fmt.Errorf("%w: the log's entries %d to %d cannot be read, and entry %d after them is intact", journal.ErrDamaged, from+1, next-1, next)
			}
			off, last = nextOff, next-1 // all applied: go on from the intact one
			continue
		}
		last = seq
		off = walNext(off, len(p))
		if seq <= applied {
			continue
		}
		if len(entries) == 0 && seq != applied+1 {
			return nil, 0, fmt.Errorf("%w: the log's entries %d to %d are missing", journal.ErrDamaged, applied+1, seq-1)
		}
		recs, err := decodeRecords(p)
		if err != nil {
			return nil, 0, err
		}
		entries = append(entries, walEntry{seq, recs, walNext(0, len(p))})
	}
}

// walEntryAfter looks from off on, block by block, for an intact entry of
// the journal id with a sequence number after seq (what an unreadable or
// older entry at off may hide, or an entry at off that skips numbers), and
// returns where it is and its number (0: none). Entries left from before
// a reuse of the log have lower numbers than any written since.
func walEntryAfter(data []byte, off int, seq uint64, id []byte) (int, uint64) {
	for i := off; i+walHeader <= len(data); i += walAlign {
		if next, eid, _, ok := walEntryAt(data, i); ok && next > seq && bytes.Equal(eid, id) {
			return i, next
		}
	}
	return 0, 0
}

// walEntryAt reads the entry at off: its sequence number, journal id and
// records, and whether it is whole (magic, length and checksum).
func walEntryAt(data []byte, off int) (seq uint64, id, p []byte, ok bool) {
	if off < 0 || off+walHeader > len(data) {
		return 0, nil, nil, false
	}
	h := data[off : off+walHeader]
	n := int(binary.LittleEndian.Uint32(h[4:]))
	if binary.LittleEndian.Uint32(h) != walMagic || n > len(data)-off-walHeader {
		return 0, nil, nil, false
	}
	seq, id, p = binary.LittleEndian.Uint64(h[8:]), h[16:24], data[off+walHeader:off+walHeader+n]
	return seq, id, p, crc32.Update(crc32.Checksum(h[4:24], walCRC), walCRC, p) == binary.LittleEndian.Uint32(h[24:])
}

// applyEntries commits entries into the bbolt file, with the sequence
// number of the last one.
func applyEntries(tx *bbolt.Tx, entries []walEntry) error {
	if len(entries) == 0 {
		return nil
	}
	fillRecordPages(tx)
	for _, r := range coalesce(entries) {
		if err := r.apply(tx); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(keyWALApplied, binary.BigEndian.AppendUint64(nil, entries[len(entries)-1].seq))
}

// fillRecordPages makes tx split the pages of the run and invocation trees
// full, not half full as bbolt does by default (for keys that arrive at
// random): a journal's ids grow with time, so its new records arrive at
// the right edge of their trees, where a half-full page stays half full.
// A record that grows later (a run's end, an outcome applied after its
// intent) splits its page if the page is full, into a full one and the
// rest, which has room for its neighbours' growth. The indexes' keys lead
// with a run, a state or a tool, and arrive in the middle: they keep the
// default.
func fillRecordPages(tx *bbolt.Tx) {
	tx.Bucket(bucketRuns).FillPercent = 1.0
	tx.Bucket(bucketInvs).FillPercent = 1.0
}

// coalesce is what entries put, one record per id (of a run or of an
// invocation): its last version, with its index entries moved from where
// its first version found them. An invocation's intent and outcome are
// usually applied together: written one by one, the record would be
// written twice and its state's index entry put and deleted again.
func coalesce(entries []walEntry) []*walRecord {
	type key struct {
		kind byte
		id   journal.ID
	}
	at := map[key]int{}
	var out []*walRecord
	for _, e := range entries {
		for _, r := range e.recs {
			k := key{r.kind, r.id}
			i, ok := at[k]
			if !ok {
				at[k] = len(out)
				out = append(out, r)
				continue
			}
			last := *r
			last.isNew, last.old = out[i].isNew, out[i].old
			out[i] = &last
		}
	}
	return out
}

// walState is what the file records of its log: the sequence number of
// the last entry applied to it, and the journal's id in its entries (nil
// when it has none yet).
func walState(tx *bbolt.Tx) (applied uint64, id []byte) {
	meta := tx.Bucket(bucketMeta)
	if v := meta.Get(keyWALApplied); len(v) == 8 {
		applied = binary.BigEndian.Uint64(v)
	}
	if v := meta.Get(keyWALID); len(v) == 8 {
		id = bytes.Clone(v)
	}
	return applied, id
}

// The applier commits the log's entries into the file lazily: when the
// log has been quiet for applyIdle, when they add up to a quarter of the
// log (so most of it is applied by the time it is full), when someone
// waits for them (a query, a reuse of the log) and at Close. Each of its
// commits is a bbolt commit, two flushes: a step's critical path is the
// log's one flush, and while runs go the file's flushes only come with a
// read that needs the file or with every 1 MiB of the log. applyIdle is
// longer than a tool call takes, so that a run whose tools do real work
// (tens or hundreds of milliseconds a call) does not apply its log at
// every step: over a 20-step run, a step then costs 1.15 flushes, not 3
// (BenchmarkFlushes in engine).
const (
	applyIdle  = time.Second
	applyBytes = walCapacity / 4
)

// applyRetry is how long the applier waits before it tries again a commit
// into the file that failed (a full disk, say). Meanwhile writes go on
// into the log, which has room of its own, and reads that need the file
// get the error.
const applyRetry = time.Second

// applier commits, in the background, the entries the log made durable
// into the bbolt file. Its goroutine is started by Open and ended by
// Close, after it applied everything queued.
type applier struct {
	db      *bbolt.DB
	path    string
	more    chan struct{} // capacity 1: entries were queued
	urgent  chan struct{} // capacity 1: someone waits, or Close
	mu      sync.Mutex
	cond    sync.Cond // applied or err changed
	queue   []walEntry
	bytes   int       // the size of the queue's entries in the log
	last    time.Time // when the last entry was queued
	waiters int       // goroutines in wait
	applied uint64    // the last entry committed to the file
	// err is why the last commit failed (nil once one succeeds); damage
	// (onDamage) stops the applier for good.
	err      error
	stop     bool
	idle     time.Duration // applyIdle (Options.ApplyIdle, tests)
	after    func()        // Options.AfterApply
	onDamage func(error)
	fail     error // when set, every commit fails with it (tests)
	done     chan struct{}
	commits  int64
}

func startApplier(db *bbolt.DB, path string, applied uint64, idle time.Duration, after func(), onDamage func(error)) *applier {
	a := &applier{db: db, path: path, applied: applied, idle: idle, after: after, onDamage: onDamage,
		done: make(chan struct{}), more: make(chan struct{}, 1), urgent: make(chan struct{}, 1)}
	a.cond.L = &a.mu
	go a.loop()
	return a
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// add queues e. It wakes the applier only when the queue was empty or has
// grown to applyBytes: a wake-up per commit would cost more than the
// commit's own work.
func (a *applier) add(e walEntry) {
	a.mu.Lock()
	a.queue = append(a.queue, e)
	a.bytes += e.size
	a.last = time.Now()
	wake := len(a.queue) == 1 || (a.bytes >= applyBytes && a.bytes-e.size < applyBytes)
	a.mu.Unlock()
	if wake {
		signal(a.more)
	}
}

func (a *applier) loop() {
	defer func() {
		a.mu.Lock()
		close(a.done) // under mu: a waiter sees it, or is woken below
		a.mu.Unlock()
		a.cond.Broadcast()
	}()
	quiet := time.NewTimer(applyIdle)
	for {
		a.mu.Lock()
		n, bytes, stop, idle, last, urgent := len(a.queue), a.bytes, a.stop, a.idle, a.last, a.waiters > 0
		a.mu.Unlock()
		if n == 0 {
			if stop {
				return
			}
			select {
			case <-a.more:
			case <-a.urgent:
			}
			continue
		}
		// Wait until the log has been quiet for idle, unless the queue
		// is large, someone waits, or Close.
		if wait := idle - time.Since(last); wait > 0 && !stop && !urgent && bytes < applyBytes {
			quiet.Reset(wait)
			select {
			case <-quiet.C:
			case <-a.more:
			case <-a.urgent:
			}
			quiet.Stop()
			continue
		}
		a.mu.Lock()
		batch, err := a.queue, a.fail
		a.mu.Unlock()
		if err == nil {
			_, err = applyBolt(a.db, a.path, []func(*bbolt.Tx) error{func(tx *bbolt.Tx) error { return applyEntries(tx, batch) }})
		}
		a.mu.Lock()
		if err != nil {
			a.err = fmt.Errorf("journal %s: apply the log to the file: %w", a.path, err)
		} else {
			a.queue = a.queue[min(len(batch), len(a.queue)):] // what came meanwhile stays
			for _, e := range batch {
				a.bytes -= e.size
			}
			if len(a.queue) == 0 {
				a.queue, a.bytes = nil, 0
			}
			a.applied, a.err = batch[len(batch)-1].seq, nil
			a.commits++
		}
		err = a.err
		a.mu.Unlock()
		a.cond.Broadcast()
		switch {
		case err == nil && a.after != nil:
			a.after()
		case errors.Is(err, journal.ErrDamaged):
			a.onDamage(err)
			return
		case err != nil && stop:
			return
		case err != nil:
			quiet.Reset(applyRetry)
			select {
			case <-quiet.C:
			case <-a.urgent: // Close, or someone new waits: try now
			}
			quiet.Stop()
		}
	}
}

// wait returns once every entry up to seq is in the file, or the error of
// the commit that failed to put them there.
func (a *applier) wait(seq uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.applied >= seq {
		return nil
	}
	a.waiters++
	defer func() { a.waiters-- }()
	signal(a.urgent)
	for a.applied < seq {
		select {
		case <-a.done: // stopped: damage, or Close
			if a.err != nil {
				return a.err
			}
			return journal.ErrClosed
		default:
		}
		a.cond.Wait()
		if a.err != nil {
			return a.err
		}
	}
	return nil
}

// close applies what is queued and ends the goroutine.
func (a *applier) close() error {
	a.mu.Lock()
	a.stop = true
	a.mu.Unlock()
	signal(a.urgent)
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) > 0 && a.err == nil {
		a.err = fmt.Errorf("journal %s: %d log entries not applied to the file", a.path, len(a.queue))
	}
	return a.err
}

// applierStats is what the applier has done, and has yet to do.
type applierStats struct {
	applied   uint64 // the last entry committed to the file
	commits   int64
	unapplied int   // the size of the entries queued
	err       error // why the last commit failed, nil once one succeeds
}

func (a *applier) stats() applierStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return applierStats{a.applied, a.commits, a.bytes, a.err}
}

// overlay holds the records that are durable in the log but may not be in
// the file yet: the latest of each, with the entry that carried it. The
// committer adds them after each append and drops those applied; reads of
// one record look here first.
type overlay struct {
	mu      sync.Mutex
	recs    map[journal.ID]overlayRec
	runs    map[journal.ID]map[journal.ID]bool // the invocations in recs of each run
	dropped uint64                             // drop looked at everything up to this entry
}

type overlayRec struct {
	seq uint64
	rec *walRecord
}

func (o *overlay) get(id journal.ID) *walRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.recs[id].rec
}

func (o *overlay) add(e walEntry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.recs == nil {
		o.recs, o.runs = map[journal.ID]overlayRec{}, map[journal.ID]map[journal.ID]bool{}
	}
	for _, r := range e.recs {
		if prev, ok := o.recs[r.id]; ok && (prev.rec.kind != r.kind || prev.rec.run != r.run) {
			o.unindex(prev.rec) // a run and an invocation may share an id (an import)
		}
		o.recs[r.id] = overlayRec{e.seq, r}
		if r.kind == recInv {
			if o.runs[r.run] == nil {
				o.runs[r.run] = map[journal.ID]bool{}
			}
			o.runs[r.run][r.id] = true
		}
	}
}

// unindex takes r out of the runs index.
func (o *overlay) unindex(r *walRecord) {
	if r.kind != recInv {
		return
	}
	delete(o.runs[r.run], r.id)
	if len(o.runs[r.run]) == 0 {
		delete(o.runs, r.run)
	}
}

// clear forgets every record (the journal is closed).
func (o *overlay) clear() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.recs, o.runs = nil, nil
}

// drop forgets the records whose latest version is applied (in the file
// as of entry applied).
func (o *overlay) drop(applied uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if applied <= o.dropped {
		return
	}
	o.dropped = applied
	for id, r := range o.recs {
		if r.seq > applied {
			continue
		}
		delete(o.recs, id)
		o.unindex(r.rec)
	}
}

// runInvs returns the invocations of run that the overlay holds, each
// with the entry that carried its latest version.
func (o *overlay) runInvs(run journal.ID) map[journal.ID]overlayRec {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[journal.ID]overlayRec, len(o.runs[run]))
	for id := range o.runs[run] {
		out[id] = o.recs[id]
	}
	return out
}

// newInvs returns the ids of the invocations of run created in entries
// not yet dropped.
func (o *overlay) newInvs(run journal.ID) []journal.ID {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []journal.ID
	for id := range o.runs[run] {
		ids = append(ids, id)
	}
	return ids
}

// openLog opens the journal's log, applies what it holds beyond what the
// file has (what a crash left there), and starts the applier. A journal
// without an id (new, or older than the log) is given one.
func (j *Store) openLog(idle time.Duration, afterApply func()) error {
	log, err := openWAL(j.logPath)
	if err != nil {
		return err
	}
	var applied uint64
	var id []byte
	if err := j.viewNow(func(tx *bbolt.Tx) error { applied, id = walState(tx); return nil }); err != nil {
		log.close()
		return err
	}
	entries, last, err := readWAL(log.f, log.size, applied, id)
	if err == nil && len(entries) > 0 {
		_, err = applyBolt(j.db, j.path, []func(*bbolt.Tx) error{func(tx *bbolt.Tx) error { return applyEntries(tx, entries) }})
	}
	if err == nil && id == nil {
		id = make([]byte, 8)
		rand.Read(id)
		_, err = applyBolt(j.db, j.path, []func(*bbolt.Tx) error{func(tx *bbolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyWALID, id) }})
	}
	if err != nil {
		log.close()
		return logError(j.path, log.path, err)
	}
	log.seq, log.id = max(applied, last), id
	j.log, j.ap = log, startApplier(j.db, j.path, log.seq, idle, afterApply, j.latch)
	j.durable.Store(log.seq)
	return nil
}

// logError is the error of an open that could not use the journal's log,
// with what to do about it.
func logError(path, logPath string, err error) error {
	hint := ""
	switch {
	case errors.Is(err, journal.ErrForeignLog):
		hint = "; move it away if it belongs to no journal you keep"
	case errors.Is(err, journal.ErrDamaged):
		hint = "; salvage copies what the journal and its log still hold into a new journal"
	}
	return fmt.Errorf("open journal %s: its log %s: %w%s", path, logPath, err, hint)
}

// unapplied counts the entries of the log at logPath that the journal
// open read-only in db does not hold yet.
func unapplied(db *bbolt.DB, logPath string) (int, error) {
	f, err := os.Open(logPath)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var applied uint64
	var id []byte
	if err := db.View(func(tx *bbolt.Tx) error { applied, id = walState(tx); return nil }); err != nil {
		return 0, err
	}
	entries, _, err := readWAL(f, st.Size(), applied, id)
	return len(entries), err
}

// commitLog runs fns on a logStore and appends what they put to the log,
// synced: groupCommit.apply for the bbolt journal. The records then go to
// the overlay (for reads) and to the applier (for the file).
func (j *Store) commitLog(fns []func(journal.Tx) error) (failed int, err error) {
	if j.log == nil {
		return -1, fmt.Errorf("journal %s was opened read-only: %w", j.path, berrors.ErrDatabaseReadOnly)
	}
	j.ov.drop(j.ap.stats().applied) // before the read transaction begins: it has them
	puts, failed, err := j.runStore(fns)
	if err != nil || len(puts) == 0 {
		return failed, err
	}
	entry := j.log.entry(puts)
	if !j.log.fits(len(entry)) {
		if err := j.ap.wait(j.log.seq); err != nil {
			return -1, err
		}
		j.log.rewind()
	}
	pages, err := j.log.write(entry)
	if err != nil {
		return -1, err
	}
	e := walEntry{j.log.seq, puts, len(entry)}
	j.ov.add(e)
	j.ap.add(e) // before it counts as durable: whoever waits for it finds it queued
	j.durable.Store(e.seq)
	j.logPages.Add(pages)
	return -1, nil
}

// runStore runs fns on one logStore and returns what they put, or the
// index of the one that failed and its error. The read transaction ends
// before anything waits on the applier (which may need to remap the file).
func (j *Store) runStore(fns []func(journal.Tx) error) (puts []*walRecord, failed int, err error) {
	cur := -1
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			failed, err = cur, fmt.Errorf("journal %s: %w: %v", j.path, journal.ErrDamaged, r)
		}
	}()
	tx, err := j.db.Begin(false)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return nil, -1, journal.ErrClosed
	}
	if err != nil {
		return nil, -1, err
	}
	defer tx.Rollback()
	s := &logStore{tx: tx, sealer: j.sealer, ov: &j.ov}
	for i, fn := range fns {
		cur = i
		if err := fn(s); err != nil {
			return nil, i, err
		}
	}
	return s.puts, -1, nil
}
