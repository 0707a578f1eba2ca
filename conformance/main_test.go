package conformance_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpflow/mcpflow/internal/testbin"
)

// Environment variables of the test binary's other modes, and the path of
// the mcpflow binary its driver runs.
const (
	driverEnv  = "MCPFLOW_CONFORMANCE_DRIVER"  // "1": be the client the suite runs
	browserEnv = "MCPFLOW_CONFORMANCE_BROWSER" // "1": be the browser mcpflow servers login opens
	mcpflowEnv = "MCPFLOW_CONFORMANCE_MCPFLOW" // the mcpflow binary the driver runs
)

// mcpflowBin is the mcpflow executable the driver runs, built once by
// TestMain (with the race detector when the tests have it).
var mcpflowBin string

// repo is the module's root directory.
var repo string

func TestMain(m *testing.M) {
	// The browser is started by mcpflow, which the driver started: it
	// inherits driverEnv too, so browserEnv is looked at first.
	switch {
	case os.Getenv(browserEnv) == "1":
		os.Exit(browserMain(os.Args[1:]))
	case os.Getenv(driverEnv) == "1":
		os.Exit(driverMain(os.Args[1:]))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin, root, cleanup, err := testbin.Build(raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	mcpflowBin, repo = bin, root
	return m.Run()
}

// node is Node ≥ 22 from examples/npm and the suite's entry point. Without
// the install the test is skipped locally and fails in CI, where .ci/run
// installs it with npm ci.
func node(t *testing.T) (bin, suite string) {
	t.Helper()
	bin, npm := testbin.Node(t, repo, "node_modules/.bin/conformance")
	return bin, filepath.Join(npm, "node_modules", ".bin", "conformance")
}
