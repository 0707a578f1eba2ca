package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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

// TestJournalLeftLinkedByAKilledCreation: mcpflow killed while it created
// the journal, after it linked the new file into place and before it
// removed the temporary name, leaves the journal with two names (the crash
// trials found this). The next command removes the temporary name and goes
// on; a second name of the user's own is still refused.
func TestJournalLeftLinkedByAKilledCreation(t *testing.T) {
	c := newCLI(t)
	hello := repoFile("examples", "workflows", "hello.yaml")
	if r := c.run("run", hello); r.code != 0 {
		t.Fatalf("first run: %+v", r)
	}
	leftover := filepath.Join(filepath.Dir(c.journalPath()), ".journal.db.3141592653.tmp")
	if err := os.Link(c.journalPath(), leftover); err != nil {
		t.Skip("no hard links here:", err)
	}
	if r := c.run("journal", "list"); r.code != 0 || !strings.Contains(r.stdout, "greet") {
		t.Fatalf("journal list with the creation's name left: %+v", r)
	}
	if _, err := os.Lstat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the creation's name is still there: %v", err)
	}
	if r := c.run("run", hello); r.code != 0 {
		t.Fatalf("second run: %+v", r)
	}

	mine := filepath.Join(c.workspace, "journal-copy.db")
	if err := os.Link(c.journalPath(), mine); err != nil {
		t.Fatal(err)
	}
	if r := c.run("journal", "list"); r.code != exitJournal || !strings.Contains(r.stderr, "hard links") {
		t.Errorf("journal list with a second name of the user's: %+v, want exit 4 naming the hard links", r)
	}
}
