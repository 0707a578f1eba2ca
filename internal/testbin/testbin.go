// Package testbin is for tests that run mcpflow as a user would, from
// other packages (proxy, mcpapi, conformance): it builds the executable
// once, and finds the Node.js and npm modules .ci/run installs in
// examples/npm.
package testbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds ./cmd/mcpflow, with the race detector when race is set, into
// a temporary directory, and returns the executable, the module's root
// directory and a function that removes the executable. The go command's
// output goes to stderr.
func Build(race bool) (bin, repo string, cleanup func(), err error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return "", "", nil, fmt.Errorf("go env GOMOD: %v", err)
	}
	repo = filepath.Dir(string(bytes.TrimSpace(out)))
	dir, err := os.MkdirTemp("", "mcpflow-bin-")
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "mcpflow")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/mcpflow")...)
	build.Dir, build.Stdout, build.Stderr = repo, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		cleanup()
		return "", "", nil, fmt.Errorf("go build ./cmd/mcpflow: %w", err)
	}
	return bin, repo, cleanup, nil
}

// Node returns examples/npm's Node.js (node_modules/.bin/node) and the
// directory, after checking that each of the files named (relative to
// examples/npm) is there too. Without them the test is skipped, except in
// CI (CI set), where .ci/run installs them with npm ci: there it fails.
func Node(t testing.TB, repo string, need ...string) (node, npm string) {
	t.Helper()
	npm = filepath.Join(repo, "examples", "npm")
	node = filepath.Join(npm, "node_modules", ".bin", "node")
	for _, f := range append([]string{node}, need...) {
		if !filepath.IsAbs(f) {
			f = filepath.Join(npm, f)
		}
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("examples/npm/node_modules is missing or incomplete (.ci/run installs it with npm ci): %v", err)
			}
			t.Skipf("needs `cd examples/npm && npm ci`: %v", err)
		}
	}
	return node, npm
}
