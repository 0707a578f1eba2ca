//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package trust

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on path (created 0600 if needed),
// waiting for other holders, in this or any other process: each call opens
// its own file description, and flock locks belong to descriptions.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
