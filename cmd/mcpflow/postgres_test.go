package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// TestPostgresJournalCommands: with --journal postgres://…, the journal's
// own commands name the database without its password, and the commands
// that work on a bbolt file say so instead of touching anything.
func TestPostgresJournalCommands(t *testing.T) {
	location := journaltest.PostgresURL(t)
	c := newCLI(t)
	hello := abs(t, repoFile("examples", "workflows", "hello.yaml"))
	if r := c.run("--journal", location, "run", hello, "--input", "name=Ada"); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	r := c.run("--journal", location, "journal", "check")
	if r.code != 0 || !strings.Contains(r.stdout, "postgres://mcpflow:xxxxx@") || !strings.HasSuffix(strings.TrimSpace(r.stdout), ": OK") {
		t.Errorf("journal check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, cmd := range []string{"compact", "salvage"} {
		args := []string{"--journal", location, "journal", cmd}
		if cmd == "salvage" {
			args = append(args, "x.db")
		}
		r := c.run(args...)
		if r.code != 2 || !strings.Contains(r.stderr, "works on a bbolt file") || strings.Contains(r.stdout+r.stderr, ":mcpflow@") {
			t.Errorf("journal %s: exit %d\n%s%s", cmd, r.code, r.stdout, r.stderr)
		}
	}
	r = c.run("--journal", location, "runs", "list", "--jq", ".[0].status")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "succeeded" {
		t.Errorf("runs list: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
}

// TestJournalMovesBetweenBackends: a journal exported with --archive from
// the bbolt file and imported into PostgreSQL holds every record as it was
// (its archive there is the same, byte for byte); a run blocked at an
// approval goes on there (approve, resume: its digests and sealed inputs
// still hold); and the PostgreSQL journal moves back into a new file the
// same way. Each journal passes check.
func TestJournalMovesBetweenBackends(t *testing.T) {
	t.Parallel()
	location := journaltest.PostgresURL(t)
	c := newCLI(t)
	wf := c.workflow("ship.yaml", `name: ship
servers:
  demo: {builtin: demo}
inputs:
  token: {type: string, secret: true}
steps:
  - {id: build, server: demo, tool: greet, with: {name: build}}
  - id: deploy
    server: demo
    tool: ledger_append
    approve: "Ship it?"
    with: {entry: "release by ${{ inputs.token }}"}
`)
	if r := c.run("run", wf, "--input", "token=s3cret"); r.code != exitBlocked {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("run", repoFile("examples", "workflows", "hello.yaml")); r.code != 0 {
		t.Fatalf("hello: exit %d\n%s", r.code, r.stderr)
	}
	archiveOf := func(journalFlag ...string) string {
		t.Helper()
		r := c.run(append(journalFlag, "journal", "export", "--archive")...)
		if r.code != 0 {
			t.Fatalf("export --archive %v: exit %d\n%s", journalFlag, r.code, r.stderr)
		}
		return r.stdout
	}
	fromFile := archiveOf()
	if n := strings.Count(fromFile, `{"run":`); n != 2 || strings.Contains(fromFile, "s3cret") {
		t.Fatalf("archive: %d runs (want 2), secret in clear: %v", n, strings.Contains(fromFile, "s3cret"))
	}
	c.writeFile(filepath.Join(c.workspace, "archive.jsonl"), fromFile)

	r := c.run("--journal", location, "journal", "import", filepath.Join(c.workspace, "archive.jsonl"))
	if r.code != 0 || !strings.Contains(r.stdout, "imported 2 runs and 4 invocations into postgres://mcpflow:xxxxx@") {
		t.Fatalf("import into PostgreSQL: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := archiveOf("--journal", location); got != fromFile {
		t.Fatalf("the PostgreSQL journal's archive differs from the file's:\n%s\n%s", got, fromFile)
	}
	if r := c.run("--journal", location, "journal", "import", filepath.Join(c.workspace, "archive.jsonl")); r.code != 0 || !strings.Contains(r.stdout, "imported 0 runs and 0 invocations") || !strings.Contains(r.stdout, "(6 records were there already)") {
		t.Fatalf("second import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The blocked run goes on in PostgreSQL.
	run := strings.TrimSpace(c.run("--journal", location, "runs", "list", "--status", "blocked", "--jq", ".[0].id").stdout)
	if r := c.run("--journal", location, "approve", run, "deploy"); r.code != 0 {
		t.Fatalf("approve: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.run("--journal", location, "resume", run); r.code != 0 || !strings.Contains(r.stdout, "succeeded") {
		t.Fatalf("resume on PostgreSQL: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	shipped := 0
	for _, row := range c.ledger() {
		if row["tool"] == "ledger_append" && strings.Contains(fmt.Sprint(row["args"]), "release by s3cret") {
			shipped++
		}
	}
	if shipped != 1 {
		t.Fatalf("the approved step ran %d times with its secret input, want once: %v", shipped, c.ledger())
	}

	// And back into a new file.
	fromPG := archiveOf("--journal", location)
	c.writeFile(filepath.Join(c.workspace, "back.jsonl"), fromPG)
	back := filepath.Join(c.workspace, "back.db")
	if r := c.run("--journal", back, "journal", "import", filepath.Join(c.workspace, "back.jsonl")); r.code != 0 || !strings.Contains(r.stdout, "imported 2 runs and 5 invocations") {
		t.Fatalf("import into a file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := archiveOf("--journal", back); got != fromPG {
		t.Fatalf("the file's archive differs from PostgreSQL's:\n%s\n%s", got, fromPG)
	}
	for _, j := range []string{c.journalPath(), location, back} {
		if r := c.run("--journal", j, "journal", "check"); r.code != 0 {
			t.Errorf("journal check %s: exit %d\n%s%s", j, r.code, r.stdout, r.stderr)
		}
	}
	if r := c.run("journal", "import", wf); r.code == 0 || !strings.Contains(r.stderr, "line 1: not JSON") {
		t.Errorf("import of a file that is not an archive: exit %d\n%s", r.code, r.stderr)
	}
}
