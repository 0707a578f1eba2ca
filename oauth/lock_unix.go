//go:build unix

package oauth

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lockedCtx runs f holding an exclusive lock on serverURL's login (a lock
// file beside it), so that processes sharing the store take turns; it
// gives up waiting for the lock when ctx ends.
func (s *Store) lockedCtx(ctx context.Context, serverURL string, f func() error) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	lf, err := os.OpenFile(s.file(serverURL)+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.New("another process holds the login's lock")
		case <-time.After(wait):
		}
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return f()
}
