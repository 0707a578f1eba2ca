package conformance_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env GOMOD:", err)
		return 1
	}
	repo = filepath.Dir(strings.TrimSpace(string(out)))
	dir, err := os.MkdirTemp("", "mcpflow-conformance-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	mcpflowBin = filepath.Join(dir, "mcpflow")
	args := []string{"build", "-o", mcpflowBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/mcpflow")...)
	build.Dir, build.Stdout, build.Stderr = repo, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build ./cmd/mcpflow:", err)
		return 1
	}
	return m.Run()
}

// node is Node ≥ 22 from examples/npm and the suite's entry point. Without
// the install the test is skipped locally and fails in CI, where .ci/run
// installs it with npm ci.
func node(t *testing.T) (bin, suite string) {
	t.Helper()
	modules := filepath.Join(repo, "examples", "npm", "node_modules")
	bin = filepath.Join(modules, ".bin", "node")
	suite = filepath.Join(modules, ".bin", "conformance")
	for _, f := range []string{bin, suite} {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("examples/npm/node_modules is incomplete (.ci/run installs it with npm ci): %v", err)
			}
			t.Skipf("needs `cd examples/npm && npm ci`: %v", err)
		}
	}
	return bin, suite
}
