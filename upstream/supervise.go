package upstream

import (
	"os"
	"os/exec"
	"slices"
	"strings"
)

// superviseEnv marks a process started as the supervisor of a command
// server (see Supervise).
const superviseEnv = "MCPFLOW_SUPERVISE"

// Supervising reports whether this process was started as the supervisor of
// a command server. mcpflow's main (and every test binary that starts
// command servers) calls it first and, if so, runs Supervise instead of
// itself:
//
//	if upstream.Supervising() {
//		os.Exit(upstream.Supervise(os.Args[1:]))
//	}
func Supervising() bool { return os.Getenv(superviseEnv) == "1" }

// childEnv is the supervisor's environment without its own marker.
func childEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, superviseEnv+"=") })
}

// supervised returns cmd started through self as its supervisor where the
// platform has one, or cmd itself.
func supervised(cmd *exec.Cmd, self string) *exec.Cmd {
	if !canSupervise || cmd.Err != nil {
		return cmd // a command that cannot be found fails as itself
	}
	s := exec.Command(self, append([]string{cmd.Path}, cmd.Args[1:]...)...)
	s.Dir, s.Env = cmd.Dir, append(slices.Clone(cmd.Env), superviseEnv+"=1")
	return s
}
