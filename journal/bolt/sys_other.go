//go:build !linux

package bolt

import "os"

func fdatasync(f *os.File) error { return f.Sync() }

// noFollow: the Lstat check before the open is all there is here.
const noFollow = 0

// hardLinks is how many names the file has (not known here).
func hardLinks(os.FileInfo) uint64 { return 1 }
