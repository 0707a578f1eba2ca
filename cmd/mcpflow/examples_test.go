package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestExamples runs every workflow in examples/workflows through the CLI.
func TestExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(repoFile("examples", "workflows", "*.yaml"))
	if err != nil || len(files) < 6 {
		t.Fatalf("examples: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		npm := name == "filesystem" || name == "roots"
		t.Run(name, func(t *testing.T) {
			if npm {
				if _, err := exec.LookPath("npx"); err != nil {
					if os.Getenv("CI") != "" {
						t.Fatalf("npx is needed for the %s example; .ci/run installs Node.js packages", name)
					}
					t.Skip("npx not installed")
				}
			}
			c := newCLI(t)
			if npm {
				usePinnedNpmServers(t, c)
			}
			r := c.run("run", abs(t, f))
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			j := c.openJournal()
			run, invs := c.onlyRun(j)
			if run.Status != journal.RunSucceeded || len(invs) == 0 {
				t.Fatalf("run %s with %d invocations", run.Status, len(invs))
			}
			switch name {
			case "fan-out":
				if len(invs) != 6 || c.ledgerCount("greet") != 5 {
					t.Errorf("%d invocations, %d greetings", len(invs), c.ledgerCount("greet"))
				}
			case "branch-on-error":
				var fallback string
				for _, inv := range invs {
					if inv.Step == "fallback" && inv.Result != nil {
						fallback = string(inv.Result.Content)
					}
				}
				if !strings.Contains(fallback, "primary said: primary backend is over quota") || !strings.Contains(r.stdout, "step happy        skipped") {
					t.Errorf("fallback's result %s\nstdout:\n%s", fallback, r.stdout)
				}
			case "filesystem":
				b, err := os.ReadFile(filepath.Join(c.workspace, "data", "note.txt"))
				if err != nil || string(b) != "written by mcpflow" {
					t.Errorf("data/note.txt = %q, %v", b, err)
				}
			case "roots":
				b, err := os.ReadFile(filepath.Join(c.workspace, "roots-note.txt"))
				if err != nil || string(b) != "written inside the workspace" {
					t.Errorf("roots-note.txt = %q, %v", b, err)
				}
				for _, inv := range invs {
					refused := inv.Result != nil && inv.Result.IsError && strings.Contains(string(inv.Result.Content), "Access denied")
					if want := inv.Step == "escape" || inv.Step == "sealed"; refused != want {
						t.Errorf("step %s: refused %v, want %v: %s", inv.Step, refused, want, inv.Result.Content)
					}
				}
			}
		})
	}
}

// TestOutcomeUnknownExample follows the steps in the example's header.
func TestOutcomeUnknownExample(t *testing.T) {
	c := newCLI(t)
	c.env = []string{"MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"}
	r := c.run("run", abs(t, repoFile("examples", "workflows", "outcome-unknown.yaml")))
	if r.code != exitBlocked {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	c.env = nil
	j := c.openJournal()
	run, invs := c.onlyRun(j)
	j.Close()
	res := filepath.Join(c.workspace, "result.json")
	os.WriteFile(res, []byte(`{"structuredContent": {"row": 1}}`), 0o600)
	if r := c.run("journal", "resolve", invs[0].ID.Short(), "--as", "completed", "--result", res, "--reason", "found in the ledger"); r.code != 0 {
		t.Fatalf("resolve: %d %s", r.code, r.stderr)
	}
	r = c.run("resume", run.ID.Short())
	if r.code != 0 || !strings.Contains(r.stdout, "your charge is row 1!") || c.ledgerCount("ledger_append") != 1 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// usePinnedNpmServers makes npx in c's workspace run the servers pinned in
// examples/npm/package-lock.json (installed there by `npm ci`), offline and
// with an empty npm cache: nothing is downloaded, nothing else can run.
func usePinnedNpmServers(t *testing.T, c *cli) {
	t.Helper()
	npm := abs(t, repoFile("examples", "npm"))
	if _, err := os.Stat(filepath.Join(npm, "node_modules")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("examples/npm/node_modules is missing: .ci/run installs it with npm ci")
		}
		t.Skip("run `cd examples/npm && npm ci` first")
	}
	b, err := os.ReadFile(filepath.Join(npm, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.workspace, "package.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(npm, "node_modules"), filepath.Join(c.workspace, "node_modules")); err != nil {
		t.Fatal(err)
	}
	// A command server inherits only a small default environment, so npm's
	// settings go in the project's .npmrc, which npx reads from its cwd.
	npmrc := "offline=true\ncache=" + t.TempDir() + "\n"
	if err := os.WriteFile(filepath.Join(c.workspace, ".npmrc"), []byte(npmrc), 0o600); err != nil {
		t.Fatal(err)
	}
}
