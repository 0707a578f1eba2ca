package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestServerProcessesEndWithTheServer: a command server started through a
// shell that leaves a grandchild behind — one that ignores SIGTERM — takes
// it along when mcpflow closes the session, and when mcpflow is killed with
// SIGKILL mid-call. (newCLI's cleanup fails the test on any process left
// with the test's tag, which the grandchild carries.)
func TestServerProcessesEndWithTheServer(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wf := func(steps string) string {
		return fmt.Sprintf(`name: wrapped
env: [MCPFLOW_TEST_TAG, GORACE]
servers:
  wrapped:
    command: sh
    args: ["-c", "(trap '' TERM; exec sleep 300) & exec \"$0\" demo-server", %q]
    env: {MCPFLOW_TEST_AS_MAIN: "1", MCPFLOW_TEST_TAG: "${MCPFLOW_TEST_TAG}", GORACE: "${GORACE}"}
steps:
%s`, exe, steps)
	}
	t.Run("closed", func(t *testing.T) {
		c := newCLI(t)
		c.env = quickExit()
		r := c.run("run", c.workflow("w.yaml", wf("  - {id: a, server: wrapped, tool: greet, with: {name: x}}\n")))
		if r.code != 0 {
			t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if pids := c.leftovers(5 * time.Second); len(pids) > 0 {
			t.Errorf("processes of the server outlived it: %v", pids)
		}
	})
	t.Run("mcpflow killed", func(t *testing.T) {
		c := newCLI(t)
		c.env = quickExit()
		cmd, wait := c.background("run", c.workflow("w.yaml", wf("  - {id: a, server: wrapped, tool: count_slowly, with: {n: 1000, delay_ms: 50}}\n")))
		deadline := time.Now().Add(20 * time.Second)
		for len(c.children(cmd.Process.Pid)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the server never started")
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // the call is in flight
		cmd.Process.Signal(syscall.SIGKILL)
		wait()
		if pids := c.leftovers(5 * time.Second); len(pids) > 0 {
			t.Errorf("processes of the server outlived a killed mcpflow: %v", pids)
		}
	})
}
