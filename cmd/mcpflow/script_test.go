package main

import (
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the user journeys in testdata/script/*.txtar: each is a
// shell-like script of mcpflow commands with their expected output.
func TestScripts(t *testing.T) {
	examples, err := filepath.Abs(repoFile("examples", "workflows"))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// mcpflow starts the builtin demo server as "<its executable>
			// demo-server"; here that executable is the test binary.
			env.Setenv(asMainEnv, "1")
			env.Setenv("NO_COLOR", "1")
			env.Setenv("EXAMPLES", examples)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			return nil
		},
	})
}
