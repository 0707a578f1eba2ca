package servers

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/spf13/pflag"

	"github.com/mcpflow/mcpflow/servers/demo"
)

// The test binary doubles as a helper, chosen before any test runs:
// "TESTBINARY demo-server FLAGS…" serves the demo over stdio, as "mcpflow
// demo-server" does, so builtin servers can use the test binary as
// Options.Self (no build of cmd/mcpflow needed).

func TestMain(m *testing.M) {
	if Supervising() {
		os.Exit(Supervise(os.Args[1:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "demo-server" {
		os.Exit(serveDemo(os.Args[2:]))
	}
	if os.Getenv("GORACE") == "" {
		// Under -race a process sleeps 1s at exit by default; the demo
		// servers this test starts inherit this and exit at once.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

func serveDemo(args []string) int {
	var cfg demo.Config
	fs := pflag.NewFlagSet("demo-server", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := demo.Serve(context.Background(), cfg, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
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
