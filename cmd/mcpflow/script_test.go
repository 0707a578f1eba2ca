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

	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the user journeys in testdata/script/*.txtar: each is a
// shell-like script of mcpflow commands with their expected output. (With
// them runs resume-prompt, kept in script_served_test.go beside the
// command that puts resume on a terminal.) Each script's transcript (what
// each mcpflow command printed, and its exit code) is kept for
// TestScriptsThroughServer, which compares it with the same script's
// through a server.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "script", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, resumePromptScript(t))
	runScripts(t, files, recordLocal(t))
}

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
	runScripts(t, files, func(env *testscript.Env) error {
		location := journaltest.PostgresURL(t)
		env.Setenv("MCPFLOW_JOURNAL", location)
		env.Defer(func() {
			// Everything went to the database, nothing to a file.
			if _, err := os.Stat(filepath.Join(env.WorkDir, ".mcpflow", "journal.db")); err == nil {
				env.T().Fatal("a bbolt journal was written beside the PostgreSQL one")
			}
			j, err := door.OpenStore(location, &journal.Options{ReadOnly: true, Key: scriptKey(env)})
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
		return nil
	})
}

// TestScriptsThroughServer runs the scripts again, each with a real
// mcpflow server started in its work directory first, so that every other
// mcpflow command goes through it as a client, and fails when a command
// prints anything different from what it printed in process (ids, times,
// durations and the work directory normalised) or exits differently — the
// way journaltest.Each runs the journal's tests on both engines.
//
// The in-process transcripts are TestScripts', when it ran before in this
// process (it is declared first) and the script passed; otherwise the
// scripts run in process here first. throughServer says how each script
// runs through a server, or why it does not; knownDifferences lists the
// commands that print differently today.
func TestScriptsThroughServer(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "script", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, resumePromptScript(t))
	var served, missing []string
	for _, f := range files {
		name := scriptName(f)
		how, ok := throughServer[name]
		if !ok {
			t.Errorf("script %s: say in throughServer how it runs through a server, or why it does not", name)
			continue
		}
		if how.skip != "" {
			continue
		}
		served = append(served, f)
		if scriptsInProcess.get(name) == nil {
			missing = append(missing, f)
		}
	}
	for _, k := range knownDifferences {
		if !slices.ContainsFunc(served, func(f string) bool { return scriptName(f) == k.script }) {
			t.Errorf("knownDifferences: script %s does not run through a server", k.script)
		}
	}
	if len(missing) > 0 {
		t.Run("in-process", func(t *testing.T) { runScripts(t, missing, recordLocal(t)) })
	}
	var through transcripts
	t.Run("served", func(t *testing.T) {
		keep := recordTo(t, &through, false)
		runScripts(t, comparedOnly(t, served), func(env *testscript.Env) error {
			if err := keep(env); err != nil {
				return err
			}
			return serveScript(env)
		})
	})
	for _, f := range served {
		name := scriptName(f)
		in, out := scriptsInProcess.get(name), through.get(name)
		if in == nil || out == nil {
			continue // it failed in process, or did not start: that failure says enough
		}
		if throughServer[name].stopAt != "" && len(out.recs) < len(in.recs) {
			in = &transcript{work: in.work, recs: in.recs[:len(out.recs)]}
		}
		compareTranscripts(t, name, in, out)
	}
}

// scriptEnvKey is the Env.Values key of the script's environment as Setup
// left it (ptyexec starts mcpflow with it).
type scriptEnvKey struct{}

// runScripts runs files (all of testdata/script when nil); setup, called
// once the common variables are set, adds to each script's environment
// and may start what the script needs.
func runScripts(t *testing.T, files []string, setup func(*testscript.Env) error) {
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
			// mcpflow starts the builtin demo server as "<its executable>
			// demo-server"; here that executable is the test binary.
			env.Setenv(asMainEnv, "1")
			env.Setenv("NO_COLOR", "1")
			env.Setenv("EXAMPLES", examples)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			if setup != nil {
				if err := setup(env); err != nil {
					return err
				}
			}
			env.Values[scriptEnvKey{}] = slices.Clone(env.Vars)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfor":  waitFor,
			"serverup": serverUp,
			"ptyexec":  ptyExec,
			"serve":    serveCmd,
			"anyexit":  anyExit,
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
	if err := waitServer(ts.MkAbs(filepath.Join(".mcpflow", "mcpflow.sock")), 30*time.Second, nil); err != nil {
		ts.Fatalf("%v", err)
	}
}

// waitServer waits, up to d, until GET /api/health answers 200 on the
// unix socket sock, or until exited (nil: never) is closed.
func waitServer(sock string, d time.Duration, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer client.CloseIdleConnections()
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := client.Get("http://mcpflow/api/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("mcpflow server exited before it answered on %s", sock)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mcpflow server never answered on %s", sock)
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
