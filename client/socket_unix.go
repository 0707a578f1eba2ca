//go:build unix

package client

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkSocket refuses a socket that is not one, or that another user
// made: what answers there would get the workflows and secret inputs sent
// to it (a socket beside a journal in a shared directory, made first by
// someone else).
func checkSocket(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if st.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s is not a socket", path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("the socket %s belongs to another user (uid %d): refusing to send it anything", path, sys.Uid)
	}
	return nil
}
