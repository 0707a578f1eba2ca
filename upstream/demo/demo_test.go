package demo

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testLedger returns a ledger path in a fresh directory that does not exist yet.
func testLedger(t *testing.T) string {
	return filepath.Join(t.TempDir(), "state", "ledger.jsonl")
}

// readLedger returns the ledger's entries; a missing file has none.
func readLedger(t *testing.T, path string) []ledgerEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var entries []ledgerEntry
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		var e ledgerEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		entries = append(entries, e)
	}
	return entries
}

// captureTransport records the raw result of every response the client reads.
// captureTransport keeps a copy of every response the client reads.
type captureTransport struct {
	mcp.Transport
	mu        sync.Mutex
	responses []*jsonrpc.Response
}

func (c *captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := c.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &captureConn{Connection: conn, c: c}, nil
}

// toolsListed returns every tool object of every captured tools/list result,
// raw, keyed by name.
func (c *captureTransport) toolsListed(t *testing.T) map[string]map[string]json.RawMessage {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	tools := map[string]map[string]json.RawMessage{}
	for _, resp := range c.responses {
		r := resp.Result
		var res struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(r, &res) != nil {
			continue
		}
		for _, tool := range res.Tools {
			var name string
			if err := json.Unmarshal(tool["name"], &name); err != nil {
				t.Fatal(err)
			}
			tools[name] = tool
		}
	}
	return tools
}

type captureConn struct {
	mcp.Connection
	c *captureTransport
}

func (cc *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := cc.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		cp := *resp
		cp.Result = slices.Clone(resp.Result)
		cc.c.mu.Lock()
		cc.c.responses = append(cc.c.responses, &cp)
		cc.c.mu.Unlock()
	}
	return msg, err
}

// last returns the newest response read, or nil.
func (c *captureTransport) last() *jsonrpc.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.responses) == 0 {
		return nil
	}
	return c.responses[len(c.responses)-1]
}

// connect serves a demo server for cfg over in-memory transports and returns
// a connected client session and the transport that captured its reads.
func connect(t *testing.T, cfg Config, opts *mcp.ClientOptions) (*mcp.ClientSession, *captureTransport) {
	t.Helper()
	d, err := newDemo(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return connectTo(t, d, opts)
}

// connectTo is connect to a demo server made already.
func connectTo(t *testing.T, d *demo, opts *mcp.ClientOptions) (*mcp.ClientSession, *captureTransport) {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := d.newServer(nil).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	capture := &captureTransport{Transport: ct}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(ctx, capture, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs, capture
}

// interceptExit replaces exit for the test and returns the codes it got.
func interceptExit(t *testing.T) func() []int {
	var (
		mu    sync.Mutex
		codes []int
	)
	old := exit
	exit = func(code int) {
		mu.Lock()
		codes = append(codes, code)
		mu.Unlock()
	}
	t.Cleanup(func() { exit = old })
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(codes)
	}
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any, key string) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if key != "" {
		p.Meta = mcp.Meta{idempotencyKeyMeta: key}
	}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("result has no content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func structured(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTools(t *testing.T) {
	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath}, nil)

	tests := []struct {
		tool       string
		args       any
		text       string
		structured string
		isError    bool
		ledgerArgs string
	}{
		{"greet", map[string]any{"name": "Ada"}, "Hello, Ada!", `{"greeting":"Hello, Ada!"}`, false, `{"name":"Ada"}`},
		{"upper", map[string]any{"text": "shout it"}, "SHOUT IT", `{"text":"SHOUT IT"}`, false, `{"text":"shout it"}`},
		{"ledger_append", map[string]any{"entry": "a"}, "appended row 3", `{"row":3}`, false, `{"entry":"a"}`},
		{"put_record", map[string]any{"key": "k", "value": "v"}, `{"key":"k","value":"v"}`, `{"key":"k","value":"v"}`, false, `{"key":"k","value":"v"}`},
		{"not_idempotent", map[string]any{"entry": "b"}, "appended row 5", `{"row":5}`, false, `{"entry":"b"}`},
		{"contradictory_read", map[string]any{}, "appended row 6", `{"row":6}`, false, `{}`},
		{"ledger_count", nil, `{"rows":6}`, `{"rows":6}`, false, `{}`},
		{"count_slowly", map[string]any{"n": 2, "delay_ms": 1}, "counted to 2", `{"count":2}`, false, `{"delay_ms":1,"n":2}`},
		{"fail", map[string]any{"message": "boom"}, "boom", `null`, true, `{"message":"boom"}`},
		{"fail", nil, "demo failure", `null`, true, `{}`},
	}
	for _, tt := range tests {
		res := call(t, cs, tt.tool, tt.args, "key-"+tt.tool)
		if got := text(t, res); got != tt.text {
			t.Errorf("%s: text = %q, want %q", tt.tool, got, tt.text)
		}
		if got := structured(t, res); got != tt.structured {
			t.Errorf("%s: structuredContent = %s, want %s", tt.tool, got, tt.structured)
		}
		if res.IsError != tt.isError {
			t.Errorf("%s: isError = %v, want %v", tt.tool, res.IsError, tt.isError)
		}
	}

	entries := readLedger(t, ledgerPath)
	if len(entries) != len(tests) {
		t.Fatalf("ledger has %d rows, want %d", len(entries), len(tests))
	}
	for i, e := range entries {
		tt := tests[i]
		if e.Seq != i+1 || e.Tool != tt.tool || e.IdempotencyKey != "key-"+tt.tool || string(e.Args) != tt.ledgerArgs {
			t.Errorf("ledger row %d = {%d %s %s %q}, want {%d %s %s %q}",
				i+1, e.Seq, e.Tool, e.Args, e.IdempotencyKey, i+1, tt.tool, tt.ledgerArgs, "key-"+tt.tool)
		}
	}
	for _, dir := range []string{filepath.Dir(ledgerPath), ledgerPath} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700 | os.ModeDir
		}
		if fi.Mode() != want {
			t.Errorf("%s mode = %v, want %v", dir, fi.Mode(), want)
		}
	}
}

func TestLedgerSeqContinuesFile(t *testing.T) {
	ledgerPath := testLedger(t)
	if err := os.MkdirAll(filepath.Dir(ledgerPath), 0o700); err != nil {
		t.Fatal(err)
	}
	// Two rows from an earlier process, the last one torn by a crash.
	if err := os.WriteFile(ledgerPath, []byte(`{"seq":1,"tool":"greet","args":{},"idempotency_key":""}`+"\n"+`{"seq":2,"to`), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, _ := connect(t, Config{Ledger: ledgerPath}, nil)
	res := call(t, cs, "ledger_append", map[string]any{"entry": "x"}, "")
	if got := text(t, res); got != "appended row 3" {
		t.Errorf("text = %q, want %q", got, "appended row 3")
	}
	data, err := os.ReadFile(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := `{"seq":3,"tool":"ledger_append","args":{"entry":"x"},"idempotency_key":""}`
	if len(lines) != 3 || lines[2] != want {
		t.Errorf("ledger lines = %q, want third line %s", lines, want)
	}
}

// With NoLedger the tools answer as usual, row 0 for the ones that count,
// and the ledger's directory is never made.
func TestNoLedger(t *testing.T) {
	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath, NoLedger: true}, nil)
	if got := text(t, call(t, cs, "greet", map[string]any{"name": "Ada"}, "k1")); got != "Hello, Ada!" {
		t.Errorf("greet said %q", got)
	}
	if got := text(t, call(t, cs, "ledger_append", map[string]any{"entry": "x"}, "k2")); got != "appended row 0" {
		t.Errorf("ledger_append said %q, want %q", got, "appended row 0")
	}
	if _, err := os.Stat(filepath.Dir(ledgerPath)); !os.IsNotExist(err) {
		t.Errorf("the ledger's directory exists (%v): something was written", err)
	}
}

func TestInvalidInputIsNotExecuted(t *testing.T) {
	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath}, nil)
	for _, c := range []struct {
		tool string
		args any
	}{
		{"greet", map[string]any{}},
		{"put_record", map[string]any{"key": "k"}},
		{"count_slowly", map[string]any{"n": 1001}},
	} {
		res := call(t, cs, c.tool, c.args, "")
		if !res.IsError {
			t.Errorf("%s(%v): isError = false, want true", c.tool, c.args)
		}
	}
	if n := len(readLedger(t, ledgerPath)); n != 0 {
		t.Errorf("ledger has %d rows, want 0", n)
	}
}

func TestCountSlowlyDefaults(t *testing.T) {
	cs, _ := connect(t, Config{Ledger: testLedger(t)}, nil)
	start := time.Now()
	res := call(t, cs, "count_slowly", nil, "")
	if got := text(t, res); got != "counted to 5" {
		t.Errorf("text = %q, want %q", got, "counted to 5")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("count_slowly with defaults took %v, want at least 5×50ms", d)
	}
}

func TestCountSlowlyProgress(t *testing.T) {
	var (
		mu   sync.Mutex
		got  []mcp.ProgressNotificationParams
		opts = &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got = append(got, *req.Params)
				mu.Unlock()
			},
		}
	)
	cs, _ := connect(t, Config{Ledger: testLedger(t)}, opts)
	p := &mcp.CallToolParams{Name: "count_slowly", Arguments: map[string]any{"n": 3, "delay_ms": 1}}
	p.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if s := structured(t, res); s != `{"count":3}` {
		t.Errorf("structuredContent = %s, want {\"count\":3}", s)
	}
	// Notifications are handled asynchronously; wait for all three.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("got %d progress notifications, want 3", len(got))
	}
	slices.SortFunc(got, func(a, b mcp.ProgressNotificationParams) int { return int(a.Progress - b.Progress) })
	for i, n := range got {
		want := mcp.ProgressNotificationParams{ProgressToken: "tok-1", Progress: float64(i + 1), Total: 3,
			Message: "counted " + string(rune('1'+i)) + " of 3"}
		if n.ProgressToken != want.ProgressToken || n.Progress != want.Progress || n.Total != want.Total || n.Message != want.Message {
			t.Errorf("notification %d = %+v, want %+v", i, n, want)
		}
	}
}

func TestCountSlowlyCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := countSlowly(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, countIn{N: 1000, DelayMS: 50}, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("countSlowly returned after %v, want promptly after cancellation", d)
	}

	// End to end: the client's cancellation ends the call.
	cs, _ := connect(t, Config{Ledger: testLedger(t)}, nil)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "count_slowly", Arguments: map[string]any{"n": 1000}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CallTool err = %v, want context.DeadlineExceeded", err)
	}
}

func TestDelay(t *testing.T) {
	cs, _ := connect(t, Config{Ledger: testLedger(t), Delay: 100 * time.Millisecond}, nil)
	start := time.Now()
	call(t, cs, "greet", map[string]any{"name": "x"}, "")
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("call took %v, want at least the 100ms delay", d)
	}
}

// wantAnnotations is the declared table written out by hand, as JSON.
var wantAnnotations = map[string]string{
	"greet":              `{"readOnlyHint":true}`,
	"upper":              `{"idempotentHint":true}`,
	"ledger_append":      ``, // no annotations object
	"put_record":         `{"destructiveHint":true,"idempotentHint":true}`,
	"not_idempotent":     `{"idempotentHint":false}`,
	"contradictory_read": `{"idempotentHint":false,"readOnlyHint":true}`,
	"ledger_count":       `{"destructiveHint":false,"readOnlyHint":true}`,
	"count_slowly":       `{"readOnlyHint":true}`,
	"fail":               `{"readOnlyHint":true}`,
	"media":              `{"readOnlyHint":true}`,
	"log":                `{"readOnlyHint":true}`,
	"transfer":           `{"destructiveHint":true,"idempotentHint":false}`,
	"roots":              `{"readOnlyHint":true}`,
}

// checkSparseAnnotations asserts that the raw tools/list results captured by
// c carry exactly the declared annotations for every demo tool.
func checkSparseAnnotations(t *testing.T, c *captureTransport) {
	t.Helper()
	tools := c.toolsListed(t)
	if len(tools) != len(wantAnnotations) {
		t.Errorf("tools/list returned %d tools, want %d", len(tools), len(wantAnnotations))
	}
	for name, want := range wantAnnotations {
		raw, ok := tools[name]["annotations"]
		if want == "" {
			if ok {
				t.Errorf("%s: annotations = %s, want absent", name, raw)
			}
			continue
		}
		// Normalize key order through a map; values stay as sent.
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: annotations %s: %v", name, raw, err)
		}
		got, _ := json.Marshal(m)
		if string(got) != want {
			t.Errorf("%s: annotations on the wire = %s, want %s", name, got, want)
		}
	}
}

func TestSparseAnnotationsOnWire(t *testing.T) {
	for _, pageSize := range []int{0, 2} {
		cs, capture := connect(t, Config{Ledger: testLedger(t), PageSize: pageSize}, nil)
		for _, err := range cs.Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
		}
		checkSparseAnnotations(t, capture)
	}
}

func TestSDKHintsOnWire(t *testing.T) {
	cs, capture := connect(t, Config{Ledger: testLedger(t), SDKHints: true}, nil)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	tools := capture.toolsListed(t)
	if len(tools) != len(declared) {
		t.Fatalf("tools/list returned %d tools, want %d", len(tools), len(declared))
	}
	for name, tool := range tools {
		raw, ok := tool["annotations"]
		if name == "ledger_append" {
			if ok {
				t.Errorf("%s: annotations = %s, want absent", name, raw)
			}
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: annotations %s: %v", name, raw, err)
		}
		for _, k := range []string{"readOnlyHint", "idempotentHint"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: SDK annotations %s lack %s", name, raw, k)
			}
		}
	}
	// greet declares only readOnlyHint; the SDK adds idempotentHint:false.
	if got := string(tools["greet"]["annotations"]); got != `{"idempotentHint":false,"readOnlyHint":true}` {
		t.Errorf("greet SDK annotations = %s", got)
	}
}

// TestToolListMadeOnce: the tools' JSON is made at the first tools/list
// and given as it was at the next, to this session and to another.
func TestToolListMadeOnce(t *testing.T) {
	d, err := newDemo(Config{Ledger: testLedger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var lists []string
	for range 2 {
		cs, capture := connectTo(t, d, nil)
		for range 2 {
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			lists = append(lists, string(capture.last().Result))
		}
	}
	for i, l := range lists[1:] {
		if l != lists[0] {
			t.Errorf("listing %d differs from the first:\n%s\n%s", i+2, l, lists[0])
		}
	}
	made := 0
	d.listed.Range(func(any, any) bool { made++; return true })
	if made != len(declared) {
		t.Errorf("%d tools' JSON kept, want the %d listed", made, len(declared))
	}
}

func TestPagination(t *testing.T) {
	cs, _ := connect(t, Config{Ledger: testLedger(t), PageSize: 2}, nil)
	var (
		names  []string
		pages  int
		cursor string
	)
	for {
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(res.Tools) > 2 {
			t.Errorf("page %d has %d tools, want at most 2", pages, len(res.Tools))
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	// The sample tool, left out of its page for this client (which
	// declares no sampling), still counts in the paging.
	if want := (len(declared) + 1 + 1) / 2; pages != want {
		t.Errorf("got %d pages, want %d for %d tools and the sample tool", pages, want, len(declared))
	}
	slices.Sort(names)
	want := slices.Sorted(func(yield func(string) bool) {
		for name := range declared {
			if !yield(name) {
				return
			}
		}
	})
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

func TestFaultExitAfterCommit(t *testing.T) {
	exits := interceptExit(t)
	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath, Fault: "exit-after-commit"}, nil)
	for i := range 2 {
		res := call(t, cs, "ledger_append", map[string]any{"entry": "x"}, "k")
		if !res.IsError || !strings.Contains(text(t, res), errExitIntercepted.Error()) {
			t.Errorf("call %d: result = %q (isError %v), want the intercepted exit", i, text(t, res), res.IsError)
		}
	}
	if got := exits(); !slices.Equal(got, []int{17, 17}) {
		t.Errorf("exit codes = %v, want [17 17]", got)
	}
	if n := len(readLedger(t, ledgerPath)); n != 2 {
		t.Errorf("ledger has %d rows, want 2 (committed before exit)", n)
	}
}

func TestFaultExitAfterCommitOnce(t *testing.T) {
	exits := interceptExit(t)
	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath, Fault: "exit-after-commit-once"}, nil)
	if res := call(t, cs, "ledger_append", map[string]any{"entry": "x"}, ""); !res.IsError {
		t.Errorf("first call: isError = false, want the intercepted exit")
	}
	if _, err := os.Stat(ledgerPath + ".fault-fired"); err != nil {
		t.Errorf("marker: %v", err)
	}
	// A new server process (a new demo) sees the marker and behaves normally.
	cs2, _ := connect(t, Config{Ledger: ledgerPath, Fault: "exit-after-commit-once"}, nil)
	if got := text(t, call(t, cs2, "ledger_append", map[string]any{"entry": "x"}, "")); got != "appended row 2" {
		t.Errorf("second call: text = %q, want %q", got, "appended row 2")
	}
	if got := exits(); !slices.Equal(got, []int{17}) {
		t.Errorf("exit codes = %v, want [17]", got)
	}
}

func TestFaultExitBeforeCommit(t *testing.T) {
	exits := interceptExit(t)
	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath, Fault: "exit-before-commit"}, nil)
	call(t, cs, "ledger_append", map[string]any{"entry": "x"}, "")
	if got := exits(); !slices.Equal(got, []int{17}) {
		t.Errorf("exit codes = %v, want [17]", got)
	}
	if n := len(readLedger(t, ledgerPath)); n != 0 {
		t.Errorf("ledger has %d rows, want 0", n)
	}
}

func TestFaultToolSelectsCalls(t *testing.T) {
	exits := interceptExit(t)
	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath, Fault: "exit-after-commit", FaultTool: "upper"}, nil)
	if got := text(t, call(t, cs, "greet", map[string]any{"name": "x"}, "")); got != "Hello, x!" {
		t.Errorf("greet: text = %q", got)
	}
	if len(exits()) != 0 {
		t.Fatalf("greet fired the fault meant for upper")
	}
	call(t, cs, "upper", map[string]any{"text": "x"}, "")
	if got := exits(); !slices.Equal(got, []int{17}) {
		t.Errorf("exit codes = %v, want [17]", got)
	}
	if n := len(readLedger(t, ledgerPath)); n != 2 {
		t.Errorf("ledger has %d rows, want 2", n)
	}
}

func TestFaultDropWithoutHTTPExits(t *testing.T) {
	exits := interceptExit(t)
	cs, _ := connect(t, Config{Ledger: testLedger(t), Fault: "drop-after-commit"}, nil)
	call(t, cs, "greet", map[string]any{"name": "x"}, "")
	if got := exits(); !slices.Equal(got, []int{17}) {
		t.Errorf("exit codes = %v, want [17]", got)
	}
}

func TestFaultHangAfterCommit(t *testing.T) {
	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath, Fault: "hang-after-commit"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ledger_append", Arguments: map[string]any{"entry": "x"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if n := len(readLedger(t, ledgerPath)); n != 1 {
		t.Errorf("ledger has %d rows, want 1", n)
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := newDemo(Config{Fault: "explode"})
	if !errors.Is(err, ErrUnknownFault) || !strings.Contains(err.Error(), "exit-after-commit-once") {
		t.Errorf("unknown fault: err = %v, want ErrUnknownFault listing the modes", err)
	}
	_, err = newDemo(Config{Fault: "exit-after-commit", FaultTool: "nope"})
	if !errors.Is(err, ErrUnknownTool) {
		t.Errorf("unknown fault tool: err = %v, want ErrUnknownTool", err)
	}
	if _, err = newDemo(Config{PageSize: -1}); err == nil {
		t.Error("negative page size: err = nil")
	}
	d, err := newDemo(Config{})
	if err != nil || d.ledger.path != DefaultLedger {
		t.Errorf("zero Config: ledger %q, err %v; want %q", d.ledger.path, err, DefaultLedger)
	}
}

func TestAfterFault(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.jsonl")
	list := func(after string) (map[string]json.RawMessage, error) {
		d, err := newDemo(Config{Ledger: ledger, Fault: "exit-after-commit-once", FaultTool: "upper", AfterFault: after})
		if err != nil {
			return nil, err
		}
		ct, st := mcp.NewInMemoryTransports()
		ss, err := d.newServer(nil).Connect(context.Background(), st, nil)
		if err != nil {
			return nil, err
		}
		defer ss.Close()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			return nil, err
		}
		defer cs.Close()
		out := map[string]json.RawMessage{}
		for tool, err := range cs.Tools(context.Background(), nil) {
			if err != nil {
				return nil, err
			}
			out[tool.Name] = nil
		}
		return out, nil
	}
	// Before the fault fired: nothing changes.
	tools, err := list(AfterFaultRemoveTool)
	if err != nil || tools == nil {
		t.Fatal(err)
	}
	if _, ok := tools["upper"]; !ok {
		t.Fatal("upper missing before the fault fired")
	}
	if err := os.WriteFile(ledger+".fault-fired", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tools, err = list(AfterFaultRemoveTool)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tools["upper"]; ok || len(tools) != len(declared)-1 {
		t.Errorf("after the fault: %d tools, upper listed: %v", len(tools), ok)
	}
	if _, err := list(AfterFaultRefuse); err == nil {
		t.Error("refuse: the server started")
	}
	if _, err := list("bogus"); err == nil {
		t.Error("an unknown after-fault mode was accepted")
	}
}

// TestMedia: one content item of each MCP type, with the sizes documented.
func TestMedia(t *testing.T) {
	cs, _ := connect(t, Config{Ledger: testLedger(t)}, nil)
	res := call(t, cs, "media", nil, "")
	var got []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			got = append(got, "text "+c.Text)
		case *mcp.ImageContent:
			got = append(got, fmt.Sprintf("image %s %d", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			got = append(got, fmt.Sprintf("audio %s %d", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			got = append(got, fmt.Sprintf("link %s %s %q %s %d", c.URI, c.Name, c.Title, c.MIMEType, *c.Size))
		case *mcp.EmbeddedResource:
			got = append(got, fmt.Sprintf("resource %s %s %q %d", c.Resource.URI, c.Resource.MIMEType, c.Resource.Text, len(c.Resource.Blob)))
		default:
			t.Errorf("unexpected content %T", c)
		}
	}
	want := []string{
		"text every content type",
		"image image/png 5300",
		"audio audio/wav 12000",
		`link file:///demo/report.md report.md "Quarterly report" text/markdown 1532`,
		`resource file:///demo/notes.txt text/plain "note 1\nnote 2\nnote 3\nnote 4\nnote 5\nnote 6\nnote 7\nnote 8\n" 0`,
		`resource file:///demo/logo.bin application/octet-stream "" 2048`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("media content:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLog: the log tool sends its message at the level asked, and a debug
// message that a client asking for info does not get.
func TestLog(t *testing.T) {
	logged := make(chan *mcp.LoggingMessageParams, 10)
	cs, _ := connect(t, Config{Ledger: testLedger(t)}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) { logged <- req.Params },
	})
	p := &mcp.CallToolParams{Name: "log", Arguments: map[string]any{"message": "disk at 91%", "level": "warning"},
		Meta: mcp.Meta{mcp.MetaKeyLogLevel: "info"}}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "logged at warning" {
		t.Errorf("text = %q", got)
	}
	cs.Close() // waits for the notifications handled before the reply
	close(logged)
	var got []string
	for m := range logged {
		got = append(got, fmt.Sprintf("%s %s %v", m.Level, m.Logger, m.Data))
	}
	if want := []string{"warning demo disk at 91%"}; !slices.Equal(got, want) {
		t.Errorf("log messages %q, want %q", got, want)
	}
}

// TestSample: the sample tool asks the client's model, on the protocol
// of 2026-07-28 (an input request, then the call again with the answer)
// and on older ones (a request of the server's during the call), and is
// listed only to clients that declare sampling.
func TestSample(t *testing.T) {
	for _, protocol := range []string{"", "2025-11-25"} {
		t.Run("protocol "+cmp.Or(protocol, "newest"), func(t *testing.T) {
			ledger := testLedger(t)
			var asked []*mcp.CreateMessageParams
			var mu sync.Mutex
			cs, _ := connect(t, Config{Ledger: ledger, Protocol: protocol}, &mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					mu.Lock()
					asked = append(asked, req.Params)
					mu.Unlock()
					return &mcp.CreateMessageResult{Role: "assistant", Model: "stub-1", StopReason: "endTurn", Content: &mcp.TextContent{Text: "Because."}}, nil
				},
			})
			if want := cmp.Or(protocol, "2026-07-28"); cs.InitializeResult().ProtocolVersion != want {
				t.Errorf("protocol %s, want %s", cs.InitializeResult().ProtocolVersion, want)
			}
			if !listsTool(t, cs, sampleTool) {
				t.Errorf("%s not listed to a client that declares sampling", sampleTool)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: sampleTool, Arguments: map[string]any{"prompt": "Why is the sky blue?"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "Because." {
				t.Fatalf("result %+v", res)
			}
			if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"model":"stub-1","stopReason":"endTurn","text":"Because."}` {
				t.Errorf("structured content %s", b)
			}
			if len(asked) != 1 {
				t.Fatalf("asked %d times", len(asked))
			}
			p := asked[0]
			if p.SystemPrompt != sampleSystemPrompt || p.MaxTokens != 100 || len(p.Messages) != 1 || p.Messages[0].Role != "user" ||
				p.Messages[0].Content.(*mcp.TextContent).Text != "Why is the sky blue?" {
				b, _ := json.Marshal(p)
				t.Errorf("asked %s", b)
			}
			if e := readLedger(t, ledger); len(e) != 1 || e[0].Tool != sampleTool {
				t.Errorf("ledger %+v, want one line for the call", e)
			}
		})
		t.Run("protocol "+cmp.Or(protocol, "newest")+" without sampling", func(t *testing.T) {
			ledger := testLedger(t)
			cs, _ := connect(t, Config{Ledger: ledger, Protocol: protocol}, nil)
			if listsTool(t, cs, sampleTool) {
				t.Errorf("%s listed to a client without sampling", sampleTool)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: sampleTool, Arguments: map[string]any{"prompt": "hi"}})
			switch {
			case protocol == "" && err == nil: // go-sdk's client fails the call it cannot fulfil
				t.Errorf("the call succeeded: %+v", res)
			case protocol != "" && (err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "the client did not answer the sampling request: ")):
				t.Errorf("the call = %+v, %v; want a tool error that says the client did not answer", res, err)
			}
			if e := readLedger(t, ledger); len(e) != 0 {
				t.Errorf("ledger %+v, want none: the tool never got its answer", e)
			}
		})
	}
	if _, err := newDemo(Config{Protocol: "2019-01-01"}); err == nil || !strings.Contains(err.Error(), "unknown protocol version") {
		t.Errorf("bad protocol: %v", err)
	}
}

func listsTool(t *testing.T, cs *mcp.ClientSession, name string) bool {
	t.Helper()
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == name {
			return true
		}
	}
	return false
}
