package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/mcpflow/mcpflow/internal/atomicfile"
)

// ledgerEntry is one line of the ledger file.
type ledgerEntry struct {
	Seq            int             `json:"seq"`
	Tool           string          `json:"tool"`
	Args           json.RawMessage `json:"args"`
	IdempotencyKey string          `json:"idempotency_key"`
}

// ledger is the append-only JSON-lines file that counts tool executions.
type ledger struct {
	mu   sync.Mutex // serializes appends within this process
	path string
	// left is the file as this process's last append left it, and lines
	// its line count: while the file is still exactly that (same file,
	// size and modification time), the next append need not read it.
	left  os.FileInfo
	lines int
}

// append writes one entry for an execution of tool and returns its seq, the
// entry's 1-based line number in the file.
//
// The line is fsynced before append returns, so a caller that replies only
// after append has returned never reports an execution the file does not
// hold. When append creates the file it also fsyncs the directory.
//
// The file is re-read when another process appended since this one's last
// append (a replaced server process), so that seq stays the line number,
// under an flock that serializes the appends of several live processes.
// Otherwise its line count is known: an append costs a write and an fsync,
// not a read of every line before it.
func (l *ledger) append(tool string, args json.RawMessage, key string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()

	dir := filepath.Dir(l.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("demo: ledger: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("demo: ledger: %w", err)
	}
	unlock, err := lockLedger(f)
	if err != nil {
		f.Close()
		return 0, fmt.Errorf("demo: ledger: %w", err)
	}
	known := -1
	if fi, err := f.Stat(); err == nil && l.left != nil && os.SameFile(fi, l.left) && fi.Size() == l.left.Size() && fi.ModTime().Equal(l.left.ModTime()) {
		known = l.lines
	}
	seq, created, err := writeEntry(f, ledgerEntry{Tool: tool, Args: args, IdempotencyKey: key}, known)
	l.left = nil
	if err == nil {
		if fi, serr := f.Stat(); serr == nil {
			l.left, l.lines = fi, seq
		}
	}
	unlock()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && created {
		err = atomicfile.SyncDir(dir)
	}
	if err != nil {
		return 0, fmt.Errorf("demo: ledger %s: %w", l.path, err)
	}
	return seq, nil
}

// writeEntry appends e to f, an O_APPEND file, with e.Seq set to the line
// number it lands on, and fsyncs f. f has known whole lines, or, when known
// is negative, it is read to count them. created reports that f was empty.
func writeEntry(f *os.File, e ledgerEntry, known int) (seq int, created bool, err error) {
	var buf bytes.Buffer
	lines := known
	if known < 0 {
		data, err := io.ReadAll(f)
		if err != nil {
			return 0, false, err
		}
		lines = bytes.Count(data, []byte("\n"))
		if n := len(data); n > 0 && data[n-1] != '\n' {
			// A torn last line (a crash mid-write) still counts as a line;
			// terminate it so the new entry starts on its own line.
			lines++
			buf.WriteByte('\n')
		}
	}
	e.Seq = lines + 1
	if a := bytes.TrimSpace(e.Args); len(a) == 0 || bytes.Equal(a, []byte("null")) {
		e.Args = json.RawMessage("{}")
	}
	line, err := json.Marshal(e) // compacts Args onto one line
	if err != nil {
		return 0, false, err
	}
	buf.Write(line)
	buf.WriteByte('\n')
	if _, err := f.Write(buf.Bytes()); err != nil {
		return 0, false, err
	}
	if err := f.Sync(); err != nil {
		return 0, false, err
	}
	return e.Seq, lines == 0, nil
}
