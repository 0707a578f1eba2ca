// Package inputfile reads the files a user names as input — workflows,
// server configurations and the files they import, a resolution's result —
// so that no such file can hang mcpflow or exhaust its memory: only regular
// files are opened (a FIFO with no writer would block, /dev/zero never
// ends), and at most a bounded number of bytes is read.
//
// # Caveats
//
//   - A file that grows while it is read is cut at the limit and refused.
//   - Standard input ([ReadReader]) is bounded the same way but cannot be
//     checked for being a regular file.
package inputfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MaxSize is the default limit: far above any real workflow or
// configuration, far below what would strain memory.
const MaxSize = 8 << 20

var (
	// ErrNotRegular: the path names a directory, a FIFO, a device or a
	// socket, not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is larger than the limit.
	ErrTooLarge = errors.New("file too large")
)

// Read reads the regular file at path, refusing one larger than max bytes
// (0: MaxSize). Errors name the path only through the *fs.PathError of os
// when the file cannot be opened; the others wrap ErrNotRegular or
// ErrTooLarge with what was found.
func Read(path string, max int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotRegular, path, kind(st.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have been replaced since the Stat: check what was opened.
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s", ErrNotRegular, path)
	}
	return ReadReader(f, path, max)
}

// ReadReader reads r (named name in errors) up to max bytes (0: MaxSize),
// refusing more.
func ReadReader(r io.Reader, name string, max int64) ([]byte, error) {
	if max <= 0 {
		max = MaxSize
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s is larger than %s", ErrTooLarge, name, size(max))
	}
	return b, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

func size(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
