package main

import (
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
