package journal

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the size, when it changed), not its
// times: what bbolt does too.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
