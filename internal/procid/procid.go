// Package procid names a process so that another process on the same
// machine can tell whether it still runs: its pid and, where the system
// says, when it started — a pid is reused, the pair is not.
package procid

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Self is this process's id: "PID" or "PID@START".
func Self() string {
	pid := os.Getpid()
	if start, ok := startTime(pid); ok {
		return fmt.Sprintf("%d@%s", pid, start)
	}
	return strconv.Itoa(pid)
}

// Alive reports whether the process id names still runs. An id that does
// not parse names no process.
func Alive(id string) bool {
	pidText, start, hasStart := strings.Cut(id, "@")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false
	}
	if !exists(pid) {
		return false
	}
	if !hasStart {
		return true
	}
	now, ok := startTime(pid)
	return !ok || now == start
}

// startTime is when process pid started, in the system's own terms (on
// Linux, clock ticks after boot, field 22 of /proc/PID/stat).
func startTime(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state): field 22 is fields[19].
	if len(fields) < 20 {
		return "", false
	}
	return fields[19], true
}
