package engine_test

// Golden tests: each testdata/golden/NAME.txtar is a workflow, a scripted
// MCP server, optional inputs and trust, and the expected outcome: the run's
// status, every journaled invocation with its attempts and replay decisions,
// every tools/call the engine sent, and the run's outputs. `go test -run
// TestGolden -update` rewrites the want sections; review them by hand.
//
// Sections:
//
//	-- workflow.yaml --  the workflow; every server name connects to the
//	                     scripted server
//	-- server.yaml --    tools: NAME: {annotations, input_schema, responses, cases}
//	-- inputs --         optional key=value lines
//	-- trust --          optional "server=true workspace=true"
//	-- render --         optional words: "arguments" adds each invocation's
//	                     journaled arguments
//	-- want --           the expected outcome
//
// annotations are passed to the engine exactly as written (JSON or YAML flow
// syntax, key order kept): absent means the tool declares no annotations
// object. responses are consumed one per call, in order; the last repeats. A
// call whose arguments contain every key/value of a case's `when` consumes
// that case's responses instead (so fan-out items get fixed responses
// whatever order they run in). A response is one of:
//
//	{text: T, structured: V}  a result (text defaults to the JSON of V)
//	{echo: true}              a result whose structuredContent is the arguments
//	{error: T}                a result with isError: true
//	{sleep: D, then: R}       the server waits D (or until cancelled), then R
//	{lost: true}              the connection breaks after sending (io.EOF)
//	{rpc_error: CODE}         a JSON-RPC error response
//	{hang: true}              no answer until the call's context ends
//
// lost, rpc_error and hang are produced by the session without contacting
// the server; the others are answered by a go-sdk server over in-memory
// transports.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"
	"golang.org/x/tools/txtar"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/golden/*.txtar")
	if len(files) < 14 {
		t.Fatalf("only %d golden cases", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runGolden(t, f)
		})
	}
}

// goldenResponseKey carries the chosen response from the session to the
// scripted server in the call's _meta.
const goldenResponseKey = "io.mcpflow.golden/response"

type goldenScript struct {
	Tools map[string]*goldenTool `yaml:"tools"`
}

type goldenTool struct {
	Annotations yaml.Node         `yaml:"annotations"`
	InputSchema yaml.Node         `yaml:"input_schema"`
	Responses   []*goldenResponse `yaml:"responses"`
	Cases       []*goldenCase     `yaml:"cases"`

	raw    json.RawMessage // annotations as JSON; nil when absent
	schema json.RawMessage
	next   int
}

type goldenCase struct {
	When      map[string]any    `yaml:"when"`
	Responses []*goldenResponse `yaml:"responses"`
	next      int
}

type goldenResponse struct {
	Text       *string         `yaml:"text" json:"text,omitempty"`
	Structured any             `yaml:"structured" json:"structured,omitempty"`
	Error      *string         `yaml:"error" json:"error,omitempty"`
	Echo       bool            `yaml:"echo" json:"echo,omitempty"`
	Sleep      time.Duration   `yaml:"sleep" json:"sleep,omitempty"`
	Then       *goldenResponse `yaml:"then" json:"then,omitempty"`
	Lost       bool            `yaml:"lost" json:"lost,omitempty"`
	RPCError   int64           `yaml:"rpc_error" json:"rpc_error,omitempty"`
	Hang       bool            `yaml:"hang" json:"hang,omitempty"`
}

func (r *goldenResponse) kinds() int {
	n := 0
	for _, b := range []bool{r.Text != nil || r.Structured != nil, r.Error != nil, r.Echo, r.Sleep > 0, r.Lost, r.RPCError != 0, r.Hang} {
		if b {
			n++
		}
	}
	return n
}

func (r *goldenResponse) check() error {
	if r.kinds() != 1 {
		return fmt.Errorf("response %+v: want exactly one of text/structured, error, echo, sleep, lost, rpc_error, hang", r)
	}
	if (r.Sleep > 0) != (r.Then != nil) {
		return fmt.Errorf("response %+v: sleep needs then, then needs sleep", r)
	}
	if r.Then != nil {
		return r.Then.check()
	}
	return nil
}

// summary is how a call line shows the response it consumed.
func (r *goldenResponse) summary() string {
	switch {
	case r.Lost:
		return "lost"
	case r.Hang:
		return "hang"
	case r.RPCError != 0:
		return fmt.Sprintf("rpc_error %d", r.RPCError)
	case r.Sleep > 0:
		return fmt.Sprintf("sleep %s then %s", r.Sleep, r.Then.summary())
	case r.Error != nil:
		return fmt.Sprintf("tool_error %q", *r.Error)
	case r.Echo:
		return "echo"
	}
	return "ok"
}

// nodeJSON converts a YAML node to JSON, keeping mapping key order, so
// annotations reach the engine exactly as the txtar spells them.
func nodeJSON(n *yaml.Node) (json.RawMessage, error) {
	var b bytes.Buffer
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		switch n.Kind {
		case yaml.DocumentNode:
			return walk(n.Content[0])
		case yaml.AliasNode:
			return walk(n.Alias)
		case yaml.MappingNode:
			b.WriteByte('{')
			for i := 0; i < len(n.Content); i += 2 {
				if i > 0 {
					b.WriteByte(',')
				}
				k, _ := json.Marshal(n.Content[i].Value)
				b.Write(k)
				b.WriteByte(':')
				if err := walk(n.Content[i+1]); err != nil {
					return err
				}
			}
			b.WriteByte('}')
		case yaml.SequenceNode:
			b.WriteByte('[')
			for i, c := range n.Content {
				if i > 0 {
					b.WriteByte(',')
				}
				if err := walk(c); err != nil {
					return err
				}
			}
			b.WriteByte(']')
		case yaml.ScalarNode:
			var v any
			if err := n.Decode(&v); err != nil {
				return err
			}
			j, err := json.Marshal(v)
			if err != nil {
				return err
			}
			b.Write(j)
		default:
			return fmt.Errorf("line %d: unexpected YAML node", n.Line)
		}
		return nil
	}
	if err := walk(n); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func parseScript(src []byte) (*goldenScript, error) {
	var s goldenScript
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	for name, tool := range s.Tools {
		if tool == nil {
			return nil, fmt.Errorf("tool %s: empty", name)
		}
		if tool.Annotations.Kind != 0 {
			raw, err := nodeJSON(&tool.Annotations)
			if err != nil {
				return nil, fmt.Errorf("tool %s: annotations: %v", name, err)
			}
			tool.raw = raw
		}
		tool.schema = json.RawMessage(`{"type":"object"}`)
		if tool.InputSchema.Kind != 0 {
			raw, err := nodeJSON(&tool.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("tool %s: input_schema: %v", name, err)
			}
			tool.schema = raw
		}
		if len(tool.Responses) == 0 {
			return nil, fmt.Errorf("tool %s: no responses", name)
		}
		all := slices.Clone(tool.Responses)
		for _, c := range tool.Cases {
			if len(c.When) == 0 || len(c.Responses) == 0 {
				return nil, fmt.Errorf("tool %s: a case needs when and responses", name)
			}
			all = append(all, c.Responses...)
		}
		for _, r := range all {
			if err := r.check(); err != nil {
				return nil, fmt.Errorf("tool %s: %v", name, err)
			}
		}
	}
	return &s, nil
}

// goldenCall is one tools/call the engine made.
type goldenCall struct {
	tool string
	args json.RawMessage
	key  string // the idempotency key: the invocation id
	resp *goldenResponse
}

// goldenSession is the engine.Session of the harness: tools/list and
// results go over the wire to a go-sdk server; annotations are the raw
// JSON of the script; faults are made here.
type goldenSession struct {
	script *goldenScript
	cs     *mcp.ClientSession

	mu         sync.Mutex
	calls      []goldenCall
	reconnects int
}

func newGoldenSession(t *testing.T, script *goldenScript) *goldenSession {
	srv := mcp.NewServer(&mcp.Implementation{Name: "golden"}, nil)
	for name, tool := range script.Tools {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: tool.schema}, goldenHandler)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "golden-test"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &goldenSession{script: script, cs: cs}
}

// goldenHandler answers with the response the session chose.
func goldenHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	b, _ := json.Marshal(req.Params.Meta[goldenResponseKey])
	var r goldenResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("golden: bad response in _meta: %v", err)
	}
	for r.Sleep > 0 {
		select {
		case <-time.After(r.Sleep):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		r = *r.Then
	}
	switch {
	case r.Error != nil:
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: *r.Error}}}, nil
	case r.Echo:
		var args map[string]any
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}, StructuredContent: args}, nil
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: r.Structured}
	text := ""
	if r.Text != nil {
		text = *r.Text
	} else if r.Structured != nil {
		j, _ := json.Marshal(r.Structured)
		text = string(j)
	}
	if text != "" || r.Text != nil {
		res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	}
	return res, nil
}

func (s *goldenSession) Tool(ctx context.Context, name string) (upstream.Tool, error) {
	res, err := s.cs.ListTools(ctx, nil)
	if err != nil {
		return upstream.Tool{}, err
	}
	for _, t := range res.Tools {
		if t.Name == name {
			tool := s.script.Tools[name]
			return upstream.Tool{Name: name, Annotations: tool.raw, InputSchema: tool.schema}, nil
		}
	}
	return upstream.Tool{}, fmt.Errorf("%w %q", upstream.ErrUnknownTool, name)
}

// pick chooses the response for a call: the first case whose when matches
// the arguments, else the tool's own sequence. The last response repeats.
func (s *goldenSession) pick(tool string, args json.RawMessage) *goldenResponse {
	tl := s.script.Tools[tool]
	var argv map[string]any
	_ = json.Unmarshal(args, &argv)
	take := func(list []*goldenResponse, next *int) *goldenResponse {
		r := list[min(*next, len(list)-1)]
		*next++
		return r
	}
	for _, c := range tl.Cases {
		if matches(c.When, argv) {
			return take(c.Responses, &c.next)
		}
	}
	return take(tl.Responses, &tl.next)
}

func matches(when, args map[string]any) bool {
	for k, want := range when {
		got, ok := args[k]
		if !ok {
			return false
		}
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		if !bytes.Equal(a, b) {
			return false
		}
	}
	return true
}

func (s *goldenSession) Call(ctx context.Context, in journal.Intent, tool string, args json.RawMessage, _ func(float64, float64, string)) (*mcp.CallToolResult, error) {
	if !in.Valid() {
		return nil, engine.ErrNoIntent
	}
	meta := map[string]any{engine.MetaIdempotencyKey: in.IdempotencyKey}
	s.mu.Lock()
	if s.script.Tools[tool] == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("golden: the engine called unknown tool %q", tool)
	}
	r := s.pick(tool, args)
	key, _ := meta[engine.MetaIdempotencyKey].(string)
	s.calls = append(s.calls, goldenCall{tool: tool, args: slices.Clone(args), key: key, resp: r})
	s.mu.Unlock()
	switch {
	case r.Lost:
		return nil, fmt.Errorf("calling \"tools/call\": %w", io.EOF)
	case r.RPCError != 0:
		return nil, &jsonrpc.Error{Code: r.RPCError, Message: fmt.Sprintf("scripted JSON-RPC error %d", r.RPCError)}
	case r.Hang:
		<-ctx.Done()
		return nil, fmt.Errorf("calling \"tools/call\": %w", ctx.Err())
	}
	m := make(map[string]any, len(meta)+1)
	for k, v := range meta {
		m[k] = v
	}
	m[goldenResponseKey] = r
	return s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: m})
}

func runGolden(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string][]byte{}
	for _, f := range ar.Files {
		switch f.Name {
		case "workflow.yaml", "server.yaml", "inputs", "trust", "render", "want":
			sections[f.Name] = f.Data
		default:
			t.Fatalf("unknown section %q", f.Name)
		}
	}
	wf, err := workflow.Load("workflow.yaml", sections["workflow.yaml"], nil)
	if err != nil {
		t.Fatal(err)
	}
	script, err := parseScript(sections["server.yaml"])
	if err != nil {
		t.Fatalf("server.yaml: %v", err)
	}
	inputs, err := wf.ParseInputs(strings.Fields(string(sections["inputs"])))
	if err != nil {
		t.Fatal(err)
	}
	var trust journal.Trust
	for _, kv := range strings.Fields(string(sections["trust"])) {
		switch kv {
		case "server=true":
			trust.Server = true
		case "workspace=true":
			trust.Workspace, trust.WorkspaceSource = true, "flag"
		default:
			t.Fatalf("trust: unknown %q", kv)
		}
	}
	render := map[string]bool{}
	for _, w := range strings.Fields(string(sections["render"])) {
		if w != "arguments" {
			t.Fatalf("render: unknown %q", w)
		}
		render[w] = true
	}

	j := journaltest.Open(t, nil)
	sess := newGoldenSession(t, script)
	eng := &engine.Engine{
		Journal: j,
		Connect: func(context.Context, string) (engine.Session, error) { return sess, nil },
		Reconnect: func(context.Context, string, engine.Session) (engine.Session, error) {
			sess.mu.Lock()
			sess.reconnects++
			sess.mu.Unlock()
			return sess, nil
		},
		Trust:   func(string) journal.Trust { return trust },
		Backoff: time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ret, err := eng.Run(ctx, wf, inputs, "")
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	run, err := j.Run(ret.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != ret.Status || !reflect.DeepEqual(run.Error, ret.Error) {
		t.Errorf("Run returned %s %v, journal has %s %v", ret.Status, ret.Error, run.Status, run.Error)
	}
	invs, err := j.RunInvocations(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := renderGolden(t, wf, script, run, invs, sess, render)

	for i := range ar.Files {
		if ar.Files[i].Name != "want" {
			continue
		}
		if *update {
			ar.Files[i].Data = []byte(got)
			if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		if want := string(ar.Files[i].Data); got != want {
			t.Errorf("outcome differs from the golden want (-want +got):\n%s", lineDiff(want, got))
		}
		return
	}
	if *update {
		ar.Files = append(ar.Files, txtar.File{Name: "want", Data: []byte(got)})
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("no want section; got:\n%s", got)
}

func renderGolden(t *testing.T, wf *workflow.Workflow, script *goldenScript, run *journal.Run, invs []journal.Invocation, sess *goldenSession, render map[string]bool) string {
	var b strings.Builder
	b.WriteString("run " + run.Status.String())
	if run.Error != nil {
		b.WriteString(" " + run.Error.Code + "\n")
		b.WriteString("error " + run.Error.Message)
	}
	b.WriteString("\n")
	if len(run.Inputs) > 0 {
		in, _ := json.Marshal(run.Inputs)
		fmt.Fprintf(&b, "inputs %s\n", in)
	}

	stepIndex := map[string]int{}
	for i, st := range wf.Steps {
		stepIndex[st.ID] = i
	}
	// Creation order, grouped by step then item: fan-out concurrency does
	// not change the rendering.
	sort.SliceStable(invs, func(a, c int) bool {
		if sa, sc := stepIndex[invs[a].Step], stepIndex[invs[c].Step]; sa != sc {
			return sa < sc
		}
		return invs[a].Item < invs[c].Item
	})
	byKey := map[string]*journal.Invocation{}
	for i := range invs {
		inv := &invs[i]
		byKey[inv.IdempotencyKey] = inv
		if inv.IdempotencyKey != inv.ID.String() {
			t.Errorf("%s: idempotency key %q is not the invocation id", unitName(inv.Step, inv.Item), inv.IdempotencyKey)
		}
		if want := script.Tools[inv.Tool].raw; inv.State != journal.StateSkipped && !bytes.Equal(inv.Annotations, want) {
			t.Errorf("%s: journaled annotations %s, want exactly the declared %s", unitName(inv.Step, inv.Item), inv.Annotations, want)
		}
		var ds []string
		for _, d := range inv.Decisions {
			ds = append(ds, string(d.Verdict)+"/"+d.Reason+"@"+string(d.View))
		}
		fmt.Fprintf(&b, "%s %s attempts=%d replays=%d", unitName(inv.Step, inv.Item), inv.State, len(inv.Attempts), inv.Tally().Replays)
		if n := inv.Tally().AgainstBudget; n > 0 {
			fmt.Fprintf(&b, " against_budget=%d", n)
		}
		if len(ds) > 0 {
			b.WriteString(" decisions=" + strings.Join(ds, ","))
		}
		if inv.Error != nil {
			b.WriteString(" error=" + inv.Error.Code)
		}
		b.WriteString("\n")
		if render["arguments"] && inv.Arguments != nil {
			fmt.Fprintf(&b, "  journaled %s\n", inv.Arguments)
		}
		for i, a := range inv.Attempts {
			what := string(a.Failure)
			switch {
			case a.EndedAt == nil:
				what = "in flight"
			case what == "":
				what = "result"
			}
			kind := ""
			if k := inv.Sent(i); k != journal.KindFirst {
				kind = " (" + string(k) + ")"
			}
			fmt.Fprintf(&b, "  attempt %d%s: %s\n", a.N, kind, what)
		}
	}

	// Calls, grouped by the invocation they belong to; an invocation's own
	// calls are sequential, so their order is deterministic.
	type line struct {
		step, item int
		text       string
	}
	var lines []line
	for _, c := range sess.calls {
		inv := byKey[c.key]
		if inv == nil {
			t.Errorf("call of %s with idempotency key %q matches no journaled invocation", c.tool, c.key)
			lines = append(lines, line{len(wf.Steps), 0, fmt.Sprintf("call ? %s %s -> %s", c.tool, c.args, c.resp.summary())})
			continue
		}
		lines = append(lines, line{stepIndex[inv.Step], inv.Item, fmt.Sprintf("call %s %s %s -> %s", unitName(inv.Step, inv.Item), c.tool, c.args, c.resp.summary())})
	}
	sort.SliceStable(lines, func(a, c int) bool {
		if lines[a].step != lines[c].step {
			return lines[a].step < lines[c].step
		}
		return lines[a].item < lines[c].item
	})
	for _, l := range lines {
		b.WriteString(l.text + "\n")
	}
	if sess.reconnects > 0 {
		fmt.Fprintf(&b, "reconnects %d\n", sess.reconnects)
	}

	// Outputs, read from the journaled run record by name so the harness
	// does not depend on the Go field.
	rb, _ := json.Marshal(run)
	var rec struct {
		Outputs map[string]json.RawMessage `json:"outputs"`
	}
	_ = json.Unmarshal(rb, &rec)
	names := make([]string, 0, len(rec.Outputs))
	for k := range rec.Outputs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "output %s = %s\n", k, rec.Outputs[k])
	}
	return b.String()
}

func unitName(step string, item int) string {
	if item < 0 {
		return step
	}
	return fmt.Sprintf("%s[%d]", step, item)
}

// lineDiff marks the lines of want and got that differ (a simple
// line-by-line comparison; enough for short golden outputs).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl == gl {
			b.WriteString("  " + wl + "\n")
			continue
		}
		if i < len(w) {
			b.WriteString("- " + wl + "\n")
		}
		if i < len(g) {
			b.WriteString("+ " + gl + "\n")
		}
	}
	return b.String()
}
