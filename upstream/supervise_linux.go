package upstream

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const canSupervise = true

// superviseGrace is how long the supervisor gives a server's processes to
// exit after SIGTERM before it sends SIGKILL. It is shorter than the time
// go-sdk gives the supervisor itself after its own SIGTERM.
const superviseGrace = 1500 * time.Millisecond

// Supervise runs args as a command server and makes sure that when it ends
// — the server exits, mcpflow closes the session, or mcpflow dies (even
// killed with SIGKILL) — every process the server started ends with it.
// The server runs in a process group of its own, with the supervisor as
// its subreaper, so processes it forks (a shell wrapper's children,
// grandchildren that ignore SIGTERM) stay in reach. When the server exits,
// or a signal arrives (mcpflow's SIGTERM at close, or the parent-death
// signal when mcpflow is gone), the group gets SIGTERM, then SIGKILL after
// a grace period. The server's standard streams are the supervisor's own.
// It returns the exit code to exit with.
func Supervise(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "mcpflow supervisor: no command")
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// Orphans of the server are reparented here, not to init.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "mcpflow supervisor: %v\n", err)
		return 127
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-sigs:
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case waitErr = <-done:
		case <-time.After(superviseGrace):
			syscall.Kill(-pgid, syscall.SIGKILL)
			waitErr = <-done
		}
	}
	endGroup(pgid)
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		return 0
	case errors.As(waitErr, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	}
	return 1
}

// endGroup ends what is left of the server's process group once the server
// itself is gone: SIGTERM, a grace period, SIGKILL, reaping every orphan
// the subreaper received.
func endGroup(pgid int) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		reap()
		return // nobody left
	}
	deadline := time.Now().Add(superviseGrace)
	for time.Now().Before(deadline) {
		reap()
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	for i := 0; i < 50 && syscall.Kill(-pgid, 0) == nil; i++ {
		reap()
		time.Sleep(10 * time.Millisecond)
	}
	reap()
}

// reap collects the exit status of every child that has exited.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
