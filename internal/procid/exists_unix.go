//go:build unix

package procid

import (
	"errors"
	"syscall"
)

// exists reports whether a process pid exists (signal 0 reaches it, or
// would, were it ours).
func exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
