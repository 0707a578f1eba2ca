package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestJournalWriteFailureExits4: when the journal cannot be written in the
// middle of a run (here: the file may not grow, as on a full disk), mcpflow
// stops with exit 4 — the journal is unavailable — not 1, and says why.
func TestJournalWriteFailureExits4(t *testing.T) {
	c := newCLI(t)
	if r := c.run("run", repoFile("examples", "workflows", "hello.yaml")); r.code != 0 {
		t.Fatalf("first run: %+v", r)
	}
	big := strings.Repeat("x", 30000)
	wf := c.workflow("big.yaml", fmt.Sprintf(`name: big
servers: {d: {builtin: demo}}
steps:
  - id: a
    server: d
    tool: upper
    for_each: ${{ [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20] }}
    with: {text: %q}
`, big))
	cmd := c.command("run", wf)
	// ulimit -f caps the size of files mcpflow writes: the journal (64 KiB
	// after the first run) cannot grow.
	cmd.Args = append([]string{"sh", "-c", `ulimit -f 64; exec "$0" "$@"`}, cmd.Args...)
	cmd.Path = "/bin/sh"
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitJournal || !strings.Contains(errb.String(), "journal failure") {
		t.Fatalf("exit %v, want 4 with a journal failure\n%s%s", err, out.String(), errb.String())
	}
}
