package client_test

import (
	"os"
	"testing"

	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/upstream/demo"
)

// The test binary serves the demo when started as "TESTBINARY demo-server
// FLAGS…", so builtin servers run as real stdio subprocesses of it.
func TestMain(m *testing.M) {
	if upstream.Supervising() {
		os.Exit(upstream.Supervise(os.Args[1:]))
	}
	if code, ok := demo.ServeCommand(os.Args[1:]); ok {
		os.Exit(code)
	}
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}
