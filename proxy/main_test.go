package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/internal/testbin"
)

// mcpflowBin is the mcpflow executable the tests start, built once by
// TestMain (with the race detector when the tests have it).
var mcpflowBin string

// repo is the module's root directory.
var repo string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin, root, cleanup, err := testbin.Build(raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	mcpflowBin, repo = bin, root
	return m.Run()
}

// workspace is a fresh workspace whose mcpflow.yaml is config, with its
// own trust store (XDG_CONFIG_HOME).
type workspace struct {
	t      *testing.T
	dir    string
	config string
	env    []string
	tag    string
}

func newWorkspace(t *testing.T, config string) *workspace {
	t.Helper()
	w := &workspace{t: t, dir: t.TempDir(), config: t.TempDir(), tag: fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())}
	if err := os.WriteFile(filepath.Join(w.dir, "mcpflow.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No server process may outlive mcpflow proxy, killed or not.
		deadline := time.Now().Add(3 * time.Second)
		for {
			pids := tagged(w.tag)
			if len(pids) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("processes left running: %v", pids)
				for _, pid := range pids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return w
}

// tagEnv marks every process a test starts, to find leftovers.
const tagEnv = "MCPFLOW_PROXY_TEST_TAG"

func (w *workspace) environ() []string {
	return append(append(os.Environ(), "NO_COLOR=1", "XDG_CONFIG_HOME="+w.config, tagEnv+"="+w.tag), w.env...)
}

// tagged lists the live processes whose environment holds tag.
func tagged(tag string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !strings.Contains(string(env), "\x00"+tagEnv+"="+tag+"\x00") {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
			continue // a zombie: exited
		}
		pids = append(pids, pid)
	}
	return pids
}

// mcpflow runs an mcpflow command in the workspace and returns its stdout.
func (w *workspace) mcpflow(args ...string) string {
	w.t.Helper()
	cmd := exec.Command(mcpflowBin, append([]string{"--workspace", w.dir}, args...)...)
	cmd.Env = w.environ()
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		w.t.Fatalf("mcpflow %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// watch starts 'mcpflow runs watch' of a proxy session's run id and
// returns once it showed the session's calls so far; the function it
// returns waits (up to 20 s) for the watch to end, with its output.
func (w *workspace) watch(id string) func() (string, error) {
	w.t.Helper()
	cmd := exec.Command(mcpflowBin, "--workspace", w.dir, "runs", "watch", id)
	cmd.Env = w.environ()
	out := &lockedWriter{w: &strings.Builder{}}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }() // until the watch ends; Cleanup ends it at the latest
	w.t.Cleanup(func() {
		cmd.Process.Kill()
		<-ended
	})
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "completed"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			w.t.Fatalf("runs watch %s never showed the session's calls:\n%s", id, out.String())
		}
	}
	return func() (string, error) {
		select {
		case err := <-ended:
			ended <- err // for Cleanup
			return out.String(), err
		case <-time.After(20 * time.Second):
			return out.String(), fmt.Errorf("runs watch still follows the session 20 s after it ended")
		}
	}
}

// events subscribes to the events of run id that the server on the
// workspace socket streams; the function it returns gives, once the run
// finished there (or after 20 s), each event's kind and step, in order.
func (w *workspace) events(id string) func() string {
	w.t.Helper()
	socket := filepath.Join(w.dir, ".mcpflow", "mcpflow.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	w.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://mcpflow/api/runs/"+id+"/events", nil)
	resp, err := hc.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		w.t.Fatalf("GET /api/runs/%s/events: %s", id, resp.Status)
	}
	seen := make(chan string, 1)
	go func() { // until the run finished or ctx ended; owned by the returned function
		defer resp.Body.Close()
		var kinds []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e struct{ Kind, Step string }
			if json.Unmarshal([]byte(data), &e) != nil {
				continue
			}
			kinds = append(kinds, strings.TrimSpace(e.Kind+" "+e.Step))
			if e.Kind == "run_finished" {
				break
			}
		}
		seen <- strings.Join(kinds, ", ")
	}()
	return func() string {
		defer cancel()
		return <-seen
	}
}

// mcpflowJSON runs an mcpflow command with -o json and decodes its output.
func (w *workspace) mcpflowJSON(v any, args ...string) {
	w.t.Helper()
	out := w.mcpflow(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		w.t.Fatalf("mcpflow %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// ledger is the demo server's execution ledger in the workspace: one
// object per call it executed (whose line is written whole).
func (w *workspace) ledger() []map[string]any {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.dir, ".mcpflow", "demo", "ledger.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		w.t.Fatal(err)
	}
	var rows []map[string]any
	lines := strings.Split(string(b), "\n")
	lines = lines[:len(lines)-1] // complete lines only: the server may be writing one
	for _, line := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			w.t.Fatalf("ledger line %q: %v", line, err)
		}
		rows = append(rows, row)
	}
	return rows
}

// executions counts the ledger's rows of tool: how many times the demo
// server executed it.
func (w *workspace) executions(tool string) int {
	n := 0
	for _, row := range w.ledger() {
		if row["tool"] == tool {
			n++
		}
	}
	return n
}

// node is Node ≥ 22 from examples/npm, and the directory of its packages.
// Without the install the test is skipped locally and fails in CI, where
// .ci/run installs it with npm ci.
func node(t *testing.T) (bin, npm string) {
	t.Helper()
	return testbin.Node(t, repo)
}

// step is one step of examples/npm/mcp-client.mjs.
type step map[string]any

// line is one line mcp-client.mjs printed.
type line struct {
	Op           string          `json:"op"`
	Ok           json.RawMessage `json:"ok"`
	Error        *rpcError       `json:"error"`
	Notification string          `json:"notification"`
	Server       map[string]any  `json:"server"`
	Capabilities map[string]any  `json:"capabilities"`
}

type rpcError struct {
	Code    *int   `json:"code"`
	Message string `json:"message"`
}

// result is the tools/call result of a line.
func (l line) result(t *testing.T) callResult {
	t.Helper()
	if l.Error != nil {
		t.Fatalf("%s failed: %s", l.Op, l.Error.Message)
	}
	var r callResult
	if err := json.Unmarshal(l.Ok, &r); err != nil {
		t.Fatalf("%s: %v: %s", l.Op, err, l.Ok)
	}
	return r
}

type callResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	Meta              map[string]any `json:"_meta"`
	Progress          []struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
		Message  string  `json:"message"`
	} `json:"progress"`
}

func (r callResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// tsClient is the official TypeScript SDK client (mcp-client.mjs) driving
// mcpflow proxy in the workspace.
type tsClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan line
	stderr *strings.Builder
	once   sync.Once

	mu            sync.Mutex
	notifications []string // the methods of the notifications the client got, in order
}

// notified is the methods of the notifications the client got so far.
func (c *tsClient) notified() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.notifications...)
}

// startClient starts mcp-client.mjs, which starts mcpflow with args (after
// --workspace) and runs steps.
func (w *workspace) startClient(steps []step, args ...string) *tsClient {
	w.t.Helper()
	bin, npm := node(w.t)
	spec, err := json.Marshal(map[string]any{
		"command": mcpflowBin,
		"args":    append([]string{"--workspace", w.dir}, args...),
		"steps":   steps,
		"name":    "proxy-test-client", "version": "4.5.6",
	})
	if err != nil {
		w.t.Fatal(err)
	}
	cmd := exec.Command(bin, filepath.Join(npm, "mcp-client.mjs"), string(spec))
	cmd.Env = w.environ()
	cmd.Dir = w.dir
	c := &tsClient{t: w.t, cmd: cmd, lines: make(chan line, 64), stderr: &strings.Builder{}}
	cmd.Stderr = &lockedWriter{w: c.stderr}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		w.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = line{Op: "unparsed", Error: &rpcError{Message: sc.Text()}}
			}
			if l.Notification != "" {
				c.mu.Lock()
				c.notifications = append(c.notifications, l.Notification)
				c.mu.Unlock()
			}
			c.lines <- l
		}
	}()
	w.t.Cleanup(func() { c.cmd.Process.Kill(); c.wait() })
	return c
}

// next is the client's next line that is not a notification.
func (c *tsClient) next() line {
	c.t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("the client ended early; its stderr:\n%s", c.stderr)
			}
			if l.Notification != "" {
				continue
			}
			return l
		case <-timeout:
			c.t.Fatalf("no answer from the client in 90s; its stderr:\n%s", c.stderr)
		}
	}
}

// resume lets a client waiting at a wait step go on.
func (c *tsClient) resume() {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		c.t.Fatal(err)
	}
}

// wait waits for the client (and so for mcpflow proxy) to exit.
func (c *tsClient) wait() error {
	var err error
	c.once.Do(func() {
		for range c.lines {
		}
		err = c.cmd.Wait()
	})
	return err
}

// run starts the client with steps and returns every line it printed
// after connecting, in order, once it exited.
func (w *workspace) run(steps []step, args ...string) []line {
	w.t.Helper()
	c := w.startClient(steps, args...)
	if l := c.next(); l.Op != "connected" {
		w.t.Fatalf("first line %+v, want connected", l)
	}
	var out []line
	for range steps {
		out = append(out, c.next())
	}
	if err := c.wait(); err != nil {
		w.t.Fatalf("client: %v\n%s", err, c.stderr)
	}
	return out
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// String is what was written, when w keeps it (a *strings.Builder).
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.w.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}
