//go:build !linux

package upstream

import (
	"fmt"
	"os"
	"os/exec"
)

const canSupervise = false

// Supervise runs args as a command server. Outside Linux there is no
// supervisor: the server is started directly (see the Linux version).
func Supervise(args []string) int {
	if len(args) == 0 {
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = childEnv()
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
