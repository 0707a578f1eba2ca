package upstream

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal asks the kernel to stop the server (or its
// supervisor, which then ends the server's whole process group) if mcpflow
// dies without closing it (kill -9): no orphaned server processes. The
// server runs in a process group of its own, so a Ctrl-C at the terminal
// reaches mcpflow, which journals what was in flight and then stops it.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
}
