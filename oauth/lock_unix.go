//go:build unix

package oauth

import (
	"os"
	"syscall"
)

// locked runs f holding an exclusive lock on serverURL's login (a lock
// file beside it), so that processes sharing the store take turns.
func (s *Store) locked(serverURL string, f func() error) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	lf, err := os.OpenFile(s.file(serverURL)+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return f()
}
