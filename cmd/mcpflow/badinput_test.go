package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBadInputs: hostile or mistaken input gets a clear error with the
// message a user sees, the right exit code, promptly, and writes nothing.
func TestBadInputs(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	write := func(name, content string) string {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		bomb += n + ": &" + n + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = n
	}
	fifo := filepath.Join(ws, "result.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(ws, "adir.yaml"), 0o700)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"empty workflow", []string{"validate", write("empty.yaml", "")}, exitUsage, "empty.yaml: empty workflow: expected a mapping with name and steps"},
		{"second YAML document", []string{"validate", write("two.yaml", "name: x\nsteps:\n  - {id: a, server: s, tool: t}\n---\nname: y\n")}, exitUsage, "two.yaml:5:1: a second YAML document (after ---): a file holds one"},
		{"not UTF-8", []string{"validate", write("latin1.yaml", "name: caf\xe9\nsteps: []\n")}, exitUsage, "latin1.yaml:1:10: byte 0xe9 is not UTF-8 (expected UTF-8 text)"},
		{"alias bomb", []string{"validate", write("bomb.yaml", bomb)}, exitUsage, "expands to more than 100000 nodes once its aliases are followed"},
		{"alias bomb in mcpflow.yaml", []string{"servers", "list", "--servers", write("bomb-servers.yaml", bomb)}, exitUsage, "expands to more than 100000 nodes"},
		{"workflow is a directory", []string{"validate", filepath.Join(ws, "adir.yaml")}, exitUsage, "adir.yaml is a directory"},
		{"workflow is a device", []string{"validate", "/dev/zero"}, exitUsage, "/dev/zero is a device"},
		{"workspace typo", []string{"--workspace", filepath.Join(ws, "no", "such"), "run", "x.yaml"}, exitUsage, "not an existing directory"},
		{"result is /dev/zero", []string{"journal", "resolve", "0123", "--as", "completed", "--result", "/dev/zero"}, exitUsage, "--result: not a regular file: /dev/zero is a device"},
		{"result is a FIFO with no writer", []string{"journal", "resolve", "0123", "--as", "completed", "--result", fifo}, exitUsage, "is a named pipe (FIFO)"},
		{"result is empty", []string{"journal", "resolve", "0123", "--as", "completed", "--result", write("empty.json", "{}")}, exitUsage, "the result has neither content nor structuredContent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, out, errs := inProcess(t, ws, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, want %d; stderr %q, want it to say %q (stdout %q)", code, tc.code, errs, tc.want, out)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
	for _, p := range []string{filepath.Join(ws, ".mcpflow", "journal.db"), filepath.Join(ws, "no")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
}
