//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package demo

import (
	"os"
	"syscall"
)

// lockLedger takes an exclusive flock on the open ledger, waiting for the
// demo servers of other processes that append to the same file (the
// servers of several mcpflow workers in one workspace): each append reads
// the file and writes a line, which must not interleave with another's.
func lockLedger(f *os.File) (unlock func(), err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
}
