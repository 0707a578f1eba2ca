//go:build unix

package engine_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used so far, user and system.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
