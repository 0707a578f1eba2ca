//go:build !linux

package journal

import "os"

func fdatasync(f *os.File) error { return f.Sync() }

// noFollow: the Lstat check before the open is all there is here.
const noFollow = 0
