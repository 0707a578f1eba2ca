package bolt

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and its size, when it changed), not its
// times: what bbolt does too. It holds f open while it runs.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	return serr
}

// noFollow makes an open refuse a symbolic link.
const noFollow = syscall.O_NOFOLLOW

// hardLinks is how many names the file has.
func hardLinks(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Nlink)
	}
	return 1
}
