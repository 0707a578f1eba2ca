package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/mcpflow/mcpflow/internal/gcpolicy"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/oauth/oauthtest"
	"github.com/mcpflow/mcpflow/upstream"
)

// The test binary doubles as the mcpflow executable: with this variable set
// it runs the CLI instead of the tests. Child processes (the builtin demo
// server is started as "<executable> demo-server") inherit it.
const asMainEnv = "MCPFLOW_TEST_AS_MAIN"

// browserEnv makes the test binary a browser for mcpflow servers login
// (set as $BROWSER): it follows the authorization URL it is given.
const browserEnv = "MCPFLOW_TEST_BROWSER"

// tagEnv marks every process a test starts, so the test can find leftovers.
const tagEnv = "MCPFLOW_TEST_TAG"

func TestMain(m *testing.M) {
	if upstream.Supervising() {
		os.Exit(upstream.Supervise(os.Args[1:]))
	}
	if os.Getenv(browserEnv) == "1" && len(os.Args) == 2 {
		// $BROWSER of servers login: follow the authorization URL.
		if err := oauthtest.Browse(os.Args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "browser:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(asMainEnv) == "1" {
		// The binary's GC target, as main sets it: the benchmarks of a
		// server's memory measure what users run.
		gcpolicy.Apply()
		killAfterCommit(os.Getenv(killAfterCommitEnv), os.Getenv(killAfterApplyEnv))
		os.Exit(runRecorded(os.Args[1:]))
	}
	testscript.Main(m, map[string]func(){
		"mcpflow": func() {
			gcpolicy.Apply()
			os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// cli runs mcpflow as a child process in a fresh workspace.
type cli struct {
	t         *testing.T
	workspace string
	config    string // XDG_CONFIG_HOME: the trust store lives here
	tag       string
	env       []string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	c := &cli{t: t, workspace: t.TempDir(), config: t.TempDir(), tag: uuid.NewString()}
	t.Cleanup(func() {
		// No server process may outlive mcpflow.
		if pids := c.leftovers(2 * time.Second); len(pids) > 0 {
			t.Errorf("processes left running: %v", pids)
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	return c
}

func (c *cli) command(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"--workspace", c.workspace}, args...)...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1", tagEnv+"="+c.tag, "NO_COLOR=1", "XDG_CONFIG_HOME="+c.config)
	cmd.Env = append(cmd.Env, c.env...)
	return cmd
}

type result struct {
	code           int
	stdout, stderr string
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	cmd := c.command(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// leftovers lists processes carrying this test's tag, waiting up to d for
// them to go away.
func (c *cli) leftovers(d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		pids := tagged(c.tag)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tagged(tag string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	want := []byte(tagEnv + "=" + tag)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if bytes.Contains(stat, []byte(") Z ")) {
			continue // a zombie has exited
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func (c *cli) journalPath() string { return filepath.Join(c.workspace, ".mcpflow", "journal.db") }

func (c *cli) ledger() []map[string]any {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.workspace, ".mcpflow", "demo", "ledger.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		c.t.Fatal(err)
	}
	var rows []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			c.t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		rows = append(rows, row)
	}
	return rows
}

func (c *cli) ledgerCount(tool string) int {
	n := 0
	for _, r := range c.ledger() {
		if r["tool"] == tool {
			n++
		}
	}
	return n
}

// openJournal opens the journal after mcpflow exited, checks it, and
// returns it; it is closed at cleanup.
func (c *cli) openJournal() *bolt.Store {
	c.t.Helper()
	journaltest.CheckFile(c.t, c.journalPath())
	// mcpflow encrypts payloads with the key in the test's config directory.
	key, err := journal.LoadKey(filepath.Join(c.config, "mcpflow"), false)
	if err != nil {
		c.t.Fatal(err)
	}
	j, err := bolt.Open(c.journalPath(), &journal.Options{ReadOnly: true, Key: key})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { j.Close() })
	return j
}

func (c *cli) onlyRun(j *bolt.Store) (*journal.Run, []journal.Invocation) {
	c.t.Helper()
	runs, err := j.Runs(journal.RunFilter{})
	if err != nil || len(runs) != 1 {
		c.t.Fatalf("runs: %v (%d), want exactly one", err, len(runs))
	}
	invs, err := j.RunInvocations(runs[0].ID)
	if err != nil {
		c.t.Fatal(err)
	}
	return &runs[0], invs
}

func repoFile(parts ...string) string {
	return filepath.Join(append([]string{"..", ".."}, parts...)...)
}

func abs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// workflow writes a workflow file into the workspace and returns its path.
func (c *cli) workflow(name, src string) string {
	c.t.Helper()
	p := filepath.Join(c.workspace, name)
	c.writeFile(p, src)
	return p
}

// writeFile writes a file of the test (mode 0600), making its directory.
func (c *cli) writeFile(path, content string) {
	c.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// exe is this test binary, which serves the demo server as a command a
// client configuration names (with MCPFLOW_TEST_AS_MAIN=1).
func (c *cli) exe() string {
	c.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		c.t.Fatal(err)
	}
	return exe
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

// lockedBuffer is a bytes.Buffer that one goroutine (a subprocess's copier,
// a progress display) writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// background starts mcpflow with args and returns the command and a function
// that waits for it to exit.
func (c *cli) background(args ...string) (*exec.Cmd, func() result) {
	c.t.Helper()
	cmd := c.command(args...)
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	var once sync.Once
	var r result
	wait := func() result {
		once.Do(func() {
			err := cmd.Wait()
			if err != nil && cmd.ProcessState == nil {
				c.t.Fatal(err)
			}
			r = result{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
		})
		return r
	}
	c.t.Cleanup(func() {
		cmd.Process.Kill()
		wait()
	})
	return cmd, wait
}

// waitLedger waits until the ledger holds n rows for tool ("": any tool).
func (c *cli) waitLedger(tool string, n int) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	count := func() int {
		if tool == "" {
			return len(c.ledger())
		}
		return c.ledgerCount(tool)
	}
	for count() < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("the ledger never got %d rows for %s: %v", n, tool, c.ledger())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
