//go:build unix

package httpapi

import "syscall"

// private runs fn with a umask that gives files it creates no permission
// for the group or others: a socket is 0600 from the moment it exists,
// not after a chmod. The umask is the process's; files other goroutines
// create meanwhile are only made more private.
func private(fn func() error) error {
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return fn()
}
