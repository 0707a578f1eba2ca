package bolt_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal/bolt"
)

// The test binary doubles as the child process of the tests that need a
// second process: JOURNAL_TEST_CHILD selects what it does.
func TestMain(m *testing.M) {
	switch os.Getenv("JOURNAL_TEST_CHILD") {
	case "lock":
		os.Exit(holdJournal(os.Getenv("JOURNAL_TEST_PATH")))
	case "crash":
		os.Exit(crashChild(os.Getenv("JOURNAL_TEST_PATH"), os.Getenv("JOURNAL_TEST_SEED")))
	}
	code := m.Run()
	removeFixture()
	os.Exit(code)
}

// holdJournal opens the journal, says "ready", and keeps it open until its
// standard input closes.
func holdJournal(path string) int {
	j, err := bolt.Open(path, nil)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := j.Close(); err != nil {
		return 1
	}
	return 0
}

// child starts the test binary as a child in mode with the journal path,
// and returns it with its output lines.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startChild(t *testing.T, mode, path string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, "JOURNAL_TEST_CHILD="+mode, "JOURNAL_TEST_PATH="+path)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 1<<16)}
	go func() {
		defer close(c.lines)
		r := bufio.NewReader(out)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return // a last line cut short by a kill is not a line
			}
			c.lines <- strings.TrimSuffix(l, "\n")
		}
	}()
	return c
}

// waitFor reads lines until one starts with prefix.
func (c *child) waitFor(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("child said no %q within 30s", prefix)
		}
	}
}
