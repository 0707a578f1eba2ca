package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"
)

// startServe runs Serve for an HTTP or SSE cfg and returns the URL from its
// "listening on" line. Cleanup cancels Serve and checks that it returned nil
// promptly.
func startServe(t *testing.T, cfg Config) string {
	url, _ := startStoppable(t, cfg)
	return url
}

// startStoppable is startServe that also returns the cancel-and-check
// function, for tests that stop the server while clients are connected.
func startStoppable(t *testing.T, cfg Config) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, cfg, strings.NewReader(""), io.Discard, pw)
		pw.Close()
	}()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	stop := sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after cancel, want nil", err)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("Serve did not return within 3s of cancel")
		}
		for range lines { // drain stderr
		}
	})
	t.Cleanup(stop)
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(line, "listening on ")
		if !ok {
			t.Fatalf("first stderr line = %q, want \"listening on ...\"", line)
		}
		return url, stop
	case err := <-done:
		t.Fatalf("Serve returned early: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no listening line within 5s")
	}
	return "", nil
}

// httpConnect connects a client over transport and returns the session and
// the capture of its reads.
func httpConnect(t *testing.T, transport mcp.Transport) (*mcp.ClientSession, *captureTransport) {
	t.Helper()
	capture := &captureTransport{Transport: transport}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), capture, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, capture
}

func streamable(t *testing.T, url string) mcp.Transport {
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}
}

func sse(t *testing.T, url string) mcp.Transport {
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return &mcp.SSEClientTransport{Endpoint: url, HTTPClient: hc}
}

func listAll(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	for _, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// callErr calls a tool that is expected to fail with a Go error (not a tool
// error) well before the timeout.
func callErr(t *testing.T, cs *mcp.ClientSession, name string, args any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err == nil {
		t.Fatalf("CallTool(%s) = %+v, want an error", name, res)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CallTool(%s) timed out instead of failing", name)
	}
	return err
}

func TestServeStreamableHTTP(t *testing.T) {
	ledgerPath := testLedger(t)
	url := startServe(t, Config{HTTPAddr: "127.0.0.1:0", Ledger: ledgerPath, PageSize: 4})
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[1-9][0-9]*/mcp$`).MatchString(url) {
		t.Fatalf("url = %q, want http://127.0.0.1:PORT/mcp", url)
	}
	cs, capture := httpConnect(t, streamable(t, url))
	listAll(t, cs)
	checkSparseAnnotations(t, capture)
	if got := text(t, call(t, cs, "greet", map[string]any{"name": "web"}, "k1")); got != "Hello, web!" {
		t.Errorf("greet: text = %q", got)
	}
	entries := readLedger(t, ledgerPath)
	if len(entries) != 1 || entries[0].Tool != "greet" || entries[0].IdempotencyKey != "k1" {
		t.Errorf("ledger = %+v, want one greet row with key k1", entries)
	}
}

func TestServeStreamableHTTPDropAfterCommit(t *testing.T) {
	exits := interceptExit(t)
	ledgerPath := testLedger(t)
	url := startServe(t, Config{HTTPAddr: "127.0.0.1:0", Ledger: ledgerPath, Fault: "drop-after-commit", FaultTool: "ledger_append"})

	cs, _ := httpConnect(t, streamable(t, url))
	err := callErr(t, cs, "ledger_append", map[string]any{"entry": "x"})
	t.Logf("dropped call: %v", err)
	if n := len(readLedger(t, ledgerPath)); n != 1 {
		t.Fatalf("ledger has %d rows after the drop, want 1", n)
	}

	// The server keeps running and the fault applies every time.
	cs2, _ := httpConnect(t, streamable(t, url))
	if got := text(t, call(t, cs2, "greet", map[string]any{"name": "again"}, "")); got != "Hello, again!" {
		t.Errorf("greet after drop: text = %q", got)
	}
	callErr(t, cs2, "ledger_append", map[string]any{"entry": "y"})
	if n := len(readLedger(t, ledgerPath)); n != 3 {
		t.Errorf("ledger has %d rows, want 3", n)
	}
	if got := exits(); len(got) != 0 {
		t.Errorf("exit called with %v; drop must keep the process running", got)
	}
}

func TestServeStreamableHTTPDropOnce(t *testing.T) {
	interceptExit(t)
	ledgerPath := testLedger(t)
	url := startServe(t, Config{HTTPAddr: "127.0.0.1:0", Ledger: ledgerPath, Fault: "drop-after-commit-once"})

	cs, _ := httpConnect(t, streamable(t, url))
	callErr(t, cs, "ledger_append", map[string]any{"entry": "x"})
	cs2, _ := httpConnect(t, streamable(t, url))
	if got := text(t, call(t, cs2, "ledger_append", map[string]any{"entry": "x"}, "")); got != "appended row 2" {
		t.Errorf("second call: text = %q, want %q", got, "appended row 2")
	}
	if _, err := os.Stat(ledgerPath + ".fault-fired"); err != nil {
		t.Errorf("marker: %v", err)
	}
}

func TestServeSSE(t *testing.T) {
	exits := interceptExit(t)
	ledgerPath := testLedger(t)
	url := startServe(t, Config{SSEAddr: "127.0.0.1:0", Ledger: ledgerPath, Fault: "drop-after-commit", FaultTool: "put_record"})
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[1-9][0-9]*/sse$`).MatchString(url) {
		t.Fatalf("url = %q, want http://127.0.0.1:PORT/sse", url)
	}
	cs, capture := httpConnect(t, sse(t, url))
	listAll(t, cs)
	checkSparseAnnotations(t, capture)
	if got := text(t, call(t, cs, "upper", map[string]any{"text": "sse"}, "")); got != "SSE" {
		t.Errorf("upper: text = %q", got)
	}
	callErr(t, cs, "put_record", map[string]any{"key": "k", "value": "v"})
	entries := readLedger(t, ledgerPath)
	if len(entries) != 2 || entries[1].Tool != "put_record" {
		t.Errorf("ledger = %+v, want upper then put_record", entries)
	}
	if got := exits(); len(got) != 0 {
		t.Errorf("exit called with %v; drop must keep the process running", got)
	}
}

func TestServeHTTPShutdownWithOpenSessions(t *testing.T) {
	ledgerPath := testLedger(t)
	url, stop := startStoppable(t, Config{HTTPAddr: "127.0.0.1:0", SSEAddr: "127.0.0.1:0", Ledger: ledgerPath, Fault: "hang-after-commit", FaultTool: "ledger_append"})
	cs, _ := httpConnect(t, streamable(t, url))
	call(t, cs, "greet", map[string]any{"name": "x"}, "")
	hung := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ledger_append", Arguments: map[string]any{"entry": "x"}})
		if err == nil && res.IsError {
			// Shutdown released the hang and the tool's error result made it
			// out before the connection closed.
			err = errors.New("tool error: " + res.Content[0].(*mcp.TextContent).Text)
		}
		hung <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); len(readLedger(t, ledgerPath)) < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the hanging call never committed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	stop() // checks that Serve returns nil within 3s despite the open session and the hanging call
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("shutdown took %v, want about the %v grace at most", d, shutdownGrace)
	}
	select {
	case err := <-hung:
		if err == nil {
			t.Error("hanging call succeeded after shutdown, want an error")
		}
	case <-time.After(5 * time.Second):
		t.Error("hanging call still blocked 5s after shutdown")
	}
}

func TestServeHTTPListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Serve(context.Background(), Config{HTTPAddr: ln.Addr().String(), Ledger: testLedger(t)}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Serve on a busy port: err = %v, want address already in use", err)
	}
}

func TestServeUnknownFault(t *testing.T) {
	err := Serve(context.Background(), Config{Fault: "sometimes"}, strings.NewReader(""), io.Discard, io.Discard)
	if !errors.Is(err, ErrUnknownFault) {
		t.Errorf("err = %v, want ErrUnknownFault", err)
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stdioServe runs Serve in stdio mode on pipes and connects a client to it.
// It returns the client, the write end of the server's stdin, everything
// the server wrote to stdout and stderr, and Serve's result channel.
func stdioServe(t *testing.T, ctx context.Context, cfg Config) (cs *mcp.ClientSession, stdin io.Closer, stdout, stderr *lockedBuffer, done <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, cfg, inR, outW, stderr) }()
	transport := &mcp.IOTransport{Reader: io.NopCloser(io.TeeReader(outR, stdout)), Writer: inW}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		outR.Close()
		cs.Close()
	})
	return cs, inW, stdout, stderr, errc
}

func waitServe(t *testing.T, done <-chan error, why string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v after %s, want nil", err, why)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Serve did not return within 5s after %s", why)
	}
}

func TestServeStdioReturnsOnEOF(t *testing.T) {
	ledgerPath := testLedger(t)
	cs, stdin, stdout, stderr, done := stdioServe(t, context.Background(), Config{Ledger: ledgerPath})
	if got := text(t, call(t, cs, "greet", map[string]any{"name": "pipe"}, "")); got != "Hello, pipe!" {
		t.Errorf("greet: text = %q", got)
	}
	stdin.Close()
	waitServe(t, done, "stdin EOF")

	// stdout carries nothing but JSON-RPC messages, stderr nothing at all.
	for line := range strings.Lines(stdout.String()) {
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Errorf("stdout line %q is not a JSON-RPC message", line)
		}
	}
	if s := stderr.String(); s != "" {
		t.Errorf("stderr = %q, want empty", s)
	}
	if n := len(readLedger(t, ledgerPath)); n != 1 {
		t.Errorf("ledger has %d rows, want 1", n)
	}
}

func TestServeStdioReturnsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cs, _, _, _, done := stdioServe(t, ctx, Config{Ledger: testLedger(t)})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitServe(t, done, "cancel with stdin still open")
}

func TestServeStdioHangEndsOnEOF(t *testing.T) {
	ledgerPath := testLedger(t)
	cs, stdin, _, _, done := stdioServe(t, context.Background(), Config{Ledger: ledgerPath, Fault: "hang-after-commit"})
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ledger_append", Arguments: map[string]any{"entry": "x"}})
	for deadline := time.Now().Add(5 * time.Second); len(readLedger(t, ledgerPath)) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the hanging call never committed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stdin.Close()
	waitServe(t, done, "stdin EOF with a hanging call")
}

func TestAddFlags(t *testing.T) {
	t.Setenv("MCPFLOW_DEMO_LEDGER", "/tmp/l.jsonl")
	t.Setenv("MCPFLOW_DEMO_FAULT", "hang-after-commit")
	t.Setenv("MCPFLOW_DEMO_FAULT_TOOL", "greet")
	t.Setenv("MCPFLOW_DEMO_DELAY", "250ms")
	t.Setenv("MCPFLOW_DEMO_PAGE_SIZE", "3")
	t.Setenv("MCPFLOW_DEMO_ANNOTATIONS", "greet={}\nupper={\"idempotentHint\":\"yes\"}\n")
	t.Setenv("MCPFLOW_DEMO_LEDGER_ENDS", "1")
	t.Setenv("MCPFLOW_DEMO_NO_LEDGER", "1")
	t.Setenv("MCPFLOW_DEMO_PROTOCOL", "2025-11-25")
	var c Config
	fs := pflag.NewFlagSet("demo-server", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"--http", "127.0.0.1:0", "--sdk-hints", "--page-size", "4"}); err != nil {
		t.Fatal(err)
	}
	want := Config{HTTPAddr: "127.0.0.1:0", Ledger: "/tmp/l.jsonl", Fault: "hang-after-commit", FaultTool: "greet",
		Delay: 250 * time.Millisecond, PageSize: 4, SDKHints: true, Annotations: []string{"greet={}", `upper={"idempotentHint":"yes"}`}, LedgerEnds: true, NoLedger: true, Protocol: "2025-11-25"}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config = %+v, want %+v", c, want)
	}
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if wantNames := []string{"after-fault", "annotations", "delay", "fault", "fault-tool", "http", "ledger", "ledger-ends", "no-ledger", "page-size", "protocol", "sdk-hints", "sse"}; !slices.Equal(names, wantNames) {
		t.Errorf("flags = %v, want %v", names, wantNames)
	}
}

func TestAddFlagsDefaults(t *testing.T) {
	for _, k := range []string{"LEDGER", "FAULT", "FAULT_TOOL", "DELAY", "PAGE_SIZE", "ANNOTATIONS", "LEDGER_ENDS", "NO_LEDGER", "PROTOCOL"} {
		t.Setenv("MCPFLOW_DEMO_"+k, "")
	}
	var c Config
	fs := pflag.NewFlagSet("demo-server", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if want := (Config{Ledger: DefaultLedger}); !reflect.DeepEqual(c, want) {
		t.Errorf("config = %+v, want %+v", c, want)
	}
}

func TestAddFlagsBadEnv(t *testing.T) {
	t.Setenv("MCPFLOW_DEMO_DELAY", "soon")
	var c Config
	fs := pflag.NewFlagSet("demo-server", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := Serve(context.Background(), c, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "MCPFLOW_DEMO_DELAY") {
		t.Errorf("Serve with a bad env delay: err = %v, want it to name MCPFLOW_DEMO_DELAY", err)
	}

	// A flag on the command line overrides the bad environment value.
	var c2 Config
	fs = pflag.NewFlagSet("demo-server", pflag.ContinueOnError)
	c2.AddFlags(fs)
	if err := fs.Parse([]string{"--delay", "1ms", "--ledger", testLedger(t)}); err != nil {
		t.Fatal(err)
	}
	if _, err := newDemo(c2); err != nil {
		t.Errorf("newDemo after --delay override: %v", err)
	}
}

// TestLedgerAppendsFromManyProcesses: demo servers of several processes
// append to one ledger (each ledger value opens the file itself, as
// another process does): every row lands whole on a line of its own, and
// seq is its line number.
func TestLedgerAppendsFromManyProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &ledger{path: path}
			for i := range 50 {
				if _, err := l.append("t", json.RawMessage(`{}`), fmt.Sprintf("k%d-%d", w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 200 {
		t.Fatalf("%d lines, want 200", len(lines))
	}
	for i, line := range lines {
		var e ledgerEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Seq != i+1 {
			t.Fatalf("line %d: %q (%v), want seq %d", i+1, line, err, i+1)
		}
	}
}

// TestLedgerSeqFollowsTheFile: an append that finds the ledger as this
// process left it counts on from its last line without reading it; one
// that finds it changed (another process's line, a torn line, a new file
// in its place) counts the file's lines again.
func TestLedgerSeqFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l := &ledger{path: path}
	appendSeq(t, l, 1)
	appendSeq(t, l, 2)
	appendSeq(t, &ledger{path: path}, 3) // another process
	appendSeq(t, l, 4)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":5,"tool":"t","ar`) // a writer that died mid-line
	f.Close()
	appendSeq(t, l, 6)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	appendSeq(t, l, 1)
	b, err := os.ReadFile(path)
	if err != nil || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("the new ledger: %q (%v), want one line", b, err)
	}
}

// TestLedgerAppendReadsNothingOfAFileAsItLeftIt: an append that finds the
// ledger as this process's last append left it (same file, size and
// modification time) does not read it. The test rewrites the file in
// place with the same size and time but one line fewer: an append that
// read it would count that.
func TestLedgerAppendReadsNothingOfAFileAsItLeftIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l := &ledger{path: path}
	appendSeq(t, l, 1)
	appendSeq(t, l, 2)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	one := bytes.Replace(b, []byte("\n"), []byte(" "), 1)  // two lines become one
	if err := os.WriteFile(path, one, 0o600); err != nil { // in place: the same file
		t.Fatal(err)
	}
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	appendSeq(t, l, 3) // 2 had it read the file again
}

// appendSeq appends a line through l and checks it lands at seq want.
func appendSeq(t *testing.T, l *ledger, want int) {
	t.Helper()
	if seq, err := l.append("t", json.RawMessage(`{}`), ""); err != nil || seq != want {
		t.Fatalf("append: seq %d (%v), want %d", seq, err, want)
	}
}
