package servers

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal asks the kernel to stop the server if mcpflow dies
// without closing it (kill -9): no orphaned server processes.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
