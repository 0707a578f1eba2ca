package upstream

import (
	"os"
	"testing"

	"github.com/mcpflow/mcpflow/upstream/demo"
)

// The test binary doubles as a helper, chosen before any test runs:
// "TESTBINARY demo-server FLAGS…" serves the demo over stdio, as "mcpflow
// demo-server" does, so builtin servers can use the test binary as
// Options.Self (no build of cmd/mcpflow needed).

func TestMain(m *testing.M) {
	if Supervising() {
		os.Exit(Supervise(os.Args[1:]))
	}
	if code, ok := demo.ServeCommand(os.Args[1:]); ok {
		os.Exit(code)
	}
	if os.Getenv("GORACE") == "" {
		// Under -race a process sleeps 1s at exit by default; the demo
		// servers this test starts inherit this and exit at once.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// self is the test binary, which serves the demo (see TestMain).
func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
