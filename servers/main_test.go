package servers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/mcpflow/mcpflow/servers/demo"
)

// The test binary doubles as two helpers, chosen before any test runs:
//
//   - "TESTBINARY demo-server FLAGS…" serves the demo over stdio, as
//     "mcpflow demo-server" does, so builtin servers can use the test binary
//     as Options.Self (no build of cmd/mcpflow needed);
//   - with trustChildEnv set, it adds directories to a trust store and
//     exits: a second process for the concurrent-writer test.
const (
	trustChildEnv  = "MCPFLOW_SERVERS_TEST_TRUST_STORE"
	trustChildDirs = "MCPFLOW_SERVERS_TEST_TRUST_DIRS"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "demo-server" {
		os.Exit(serveDemo(os.Args[2:]))
	}
	if store := os.Getenv(trustChildEnv); store != "" {
		os.Exit(trustChild(store, os.Getenv(trustChildDirs)))
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

func trustChild(store, dirs string) int {
	s := OpenTrustStore(store)
	for _, d := range strings.Split(dirs, string(os.PathListSeparator)) {
		if err := s.Add(d); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
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
