package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the user journeys in testdata/script/*.txtar: each is a
// shell-like script of mcpflow commands with their expected output.
func TestScripts(t *testing.T) { runScripts(t, nil, nil) }

// TestScriptsOnPostgres runs the same journeys with the journal in
// PostgreSQL (MCPFLOW_JOURNAL, a schema of its own per script): the same
// output and exit codes, crash and resume included. validate-errors looks
// at the bbolt file itself and is not among them.
func TestScriptsOnPostgres(t *testing.T) {
	journaltest.RequirePostgres(t)
	files, err := filepath.Glob(filepath.Join("testdata", "script", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "validate-errors.txtar") })
	runScripts(t, files, func(env *testscript.Env) {
		location := journaltest.PostgresURL(t)
		env.Setenv("MCPFLOW_JOURNAL", location)
		env.Defer(func() {
			// Everything went to the database, nothing to a file.
			if _, err := os.Stat(filepath.Join(env.WorkDir, ".mcpflow", "journal.db")); err == nil {
				env.T().Fatal("a bbolt journal was written beside the PostgreSQL one")
			}
			j, err := journal.OpenStore(location, &journal.Options{ReadOnly: true, Key: scriptKey(env)})
			if err != nil {
				env.T().Fatal(err)
			}
			defer j.Close()
			if n, _, err := j.CountRuns(journal.RunFilter{}, 1); err != nil || n != 1 {
				env.T().Fatal(fmt.Sprintf("runs in PostgreSQL: %d, %v", n, err))
			}
			if probs, err := j.Check(); err != nil || len(probs) > 0 {
				env.T().Fatal(fmt.Sprintf("journal check on PostgreSQL: %v %v", probs, err))
			}
		})
	})
}

// runScripts runs files (all of testdata/script when nil), with setup
// adding to each script's environment.
func runScripts(t *testing.T, files []string, setup func(*testscript.Env)) {
	examples, err := filepath.Abs(repoFile("examples", "workflows"))
	if err != nil {
		t.Fatal(err)
	}
	dir := "testdata/script"
	if files != nil {
		dir = ""
	}
	testscript.Run(t, testscript.Params{
		Dir:   dir,
		Files: files,
		Setup: func(env *testscript.Env) error {
			if setup != nil {
				setup(env)
			}
			// mcpflow starts the builtin demo server as "<its executable>
			// demo-server"; here that executable is the test binary.
			env.Setenv(asMainEnv, "1")
			env.Setenv("NO_COLOR", "1")
			env.Setenv("EXAMPLES", examples)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfor":  waitFor,
			"serverup": serverUp,
		},
	})
}

// waitFor waits, up to 30s, until a file exists: waitfor FILE.
func waitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfor FILE")
	}
	path := ts.MkAbs(args[0])
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s never appeared", args[0])
		}
	}
}

// serverUp waits, up to 30s, until mcpflow server answers on the
// workspace's socket (a stale socket file does not count): serverup.
func serverUp(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: serverup")
	}
	sock := ts.MkAbs(filepath.Join(".mcpflow", "mcpflow.sock"))
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := client.Get("http://mcpflow/api/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("mcpflow server never answered on %s", sock)
		}
	}
}

// scriptKey is the journal key of a script's user (its XDG_CONFIG_HOME),
// or nil when it has none.
func scriptKey(env *testscript.Env) *journal.Key {
	k, err := journal.LoadKey(filepath.Join(env.WorkDir, ".config", "mcpflow"), false)
	if err != nil {
		return nil
	}
	return k
}
