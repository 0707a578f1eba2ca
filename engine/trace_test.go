package engine_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/telemetry"
	"github.com/mcpflow/mcpflow/upstream"
)

// otlpReceiver is an OTLP/HTTP traces endpoint: it decodes the real
// protobuf export requests and keeps their spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
		return
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func attrs(kv []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range kv {
		switch v := a.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[a.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[a.Key] = itoa(v.IntValue)
		case *commonpb.AnyValue_BoolValue:
			if v.BoolValue {
				m[a.Key] = "true"
			} else {
				m[a.Key] = "false"
			}
		}
	}
	return m
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// traceEcho connects to examples/npm/trace-echo.mjs, an MCP server on the
// official TypeScript SDK. Without node or examples/npm/node_modules the
// test is skipped locally and fails in CI.
func traceEcho(t *testing.T) engine.Session {
	t.Helper()
	npm, err := filepath.Abs(filepath.Join("..", "examples", "npm"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(npm, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node and examples/npm/node_modules are needed (.ci/run installs them with npm ci): %v", err)
		}
		t.Skipf("needs node and `cd examples/npm && npm ci`: %v", err)
	}
	srv := &upstream.Server{Name: "ts", Command: node, Args: []string{filepath.Join(npm, "trace-echo.mjs")}}
	s, err := upstream.Connect(context.Background(), srv, &upstream.Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return engine.MCP(s)
}

// TestTracesExported runs a workflow with OTLP export on against a receiver
// in the test: one span per run, step, for_each item and attempt, in a
// tree under the caller's TRACEPARENT; the attempt's attributes after the
// MCP conventions; the replay after a lost connection as a span event; the
// trace context in _meta as the TypeScript SDK server received it; and no
// secret input anywhere in what was exported.
func TestTracesExported(t *testing.T) {
	recv := &otlpReceiver{}
	hs := httptest.NewServer(recv)
	defer hs.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", hs.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", "mcpflow-test")
	shutdown, err := telemetry.Setup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	ts := traceEcho(t)

	j := journaltest.Open(t, &journal.Options{OnCommit: telemetry.OnCommit})
	flaky := &flakySession{}
	eng := newEngine(j, flaky)
	eng.Trust = func(string) journal.Trust { return journal.Trust{Server: true, Workspace: true} }
	eng.Connect = func(_ context.Context, name string) (engine.Session, error) {
		if name == "ts" {
			return ts, nil
		}
		return flaky, nil
	}
	const secret = "hunter2-do-not-export"
	wf := load(t, `
name: traced
inputs:
  token: {type: string, secret: true}
servers: {s: {builtin: demo}, ts: {builtin: demo}}
steps:
  - {id: put, server: s, tool: t, with: {token: "${{ inputs.token }}"}}
  - {id: echo, server: ts, tool: meta, with: {token: "${{ inputs.token }}"}}
  - {id: each, server: s, tool: t, for_each: "${{ [1, 2] }}", with: {n: "${{ item }}"}}
`)
	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := telemetry.FromEnv(context.Background(), func(name string) string {
		if name == "TRACEPARENT" {
			return "00-" + parentTrace + "-" + parentSpan + "-01"
		}
		return ""
	})
	run, err := eng.Run(ctx, wf, map[string]any{"token": secret}, "")
	if err != nil || run.Status != journal.RunSucceeded {
		t.Fatalf("run: %v %+v", err, run)
	}
	if err := shutdown(); err != nil {
		t.Fatal(err)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	var runSpan *tracepb.Span
	children := map[string][]*tracepb.Span{}
	for _, s := range recv.spans {
		if hex.EncodeToString(s.TraceId) != parentTrace && s.Name != "mcpflow.journal.commit" {
			t.Errorf("span %s in trace %x, want the caller's %s", s.Name, s.TraceId, parentTrace)
		}
		byID[hex.EncodeToString(s.SpanId)] = s
		children[hex.EncodeToString(s.ParentSpanId)] = append(children[hex.EncodeToString(s.ParentSpanId)], s)
		if s.Name == "mcpflow.run" {
			runSpan = s
		}
		// Secrets and payloads never leave.
		b, _ := proto.Marshal(s)
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("span %s carries the secret input", s.Name)
		}
	}
	if runSpan == nil {
		t.Fatalf("no mcpflow.run span among %d", len(recv.spans))
	}
	var commits int
	for _, s := range recv.spans {
		if s.Name == "mcpflow.journal.commit" && attrs(s.Attributes)["mcpflow.journal.writes"] != "" {
			commits++
		}
	}
	if st := j.Stats(); commits == 0 || int64(commits) > st.Commits {
		t.Errorf("%d commit spans, journal made %d commits", commits, st.Commits)
	}
	if got := hex.EncodeToString(runSpan.ParentSpanId); got != parentSpan {
		t.Errorf("run span's parent %s, want TRACEPARENT's %s", got, parentSpan)
	}
	if a := attrs(runSpan.Attributes); a[engine.AttrRunID] != run.ID.String() || a[engine.AttrRunStatus] != "succeeded" || a[engine.AttrWorkflow] != "traced" {
		t.Errorf("run span attributes %v", a)
	}
	if want := "00-" + parentTrace + "-" + hex.EncodeToString(runSpan.SpanId) + "-01"; run.TraceParent != want {
		t.Errorf("journaled TraceParent %q, want %q", run.TraceParent, want)
	}
	// The tree: run → step (→ item) → attempts.
	steps := map[string]*tracepb.Span{}
	for _, s := range children[hex.EncodeToString(runSpan.SpanId)] {
		if s.Name != "mcpflow.step" {
			t.Errorf("child of the run: %s", s.Name)
			continue
		}
		steps[attrs(s.Attributes)[engine.AttrStep]] = s
	}
	if len(steps) != 3 {
		t.Fatalf("step spans %v, want put, echo, each", steps)
	}
	attemptsOf := func(parent *tracepb.Span) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range children[hex.EncodeToString(parent.SpanId)] {
			if strings.HasPrefix(s.Name, "tools/call ") {
				out = append(out, s)
			}
		}
		return out
	}
	put := attemptsOf(steps["put"])
	if len(put) != 2 {
		t.Fatalf("put has %d attempt spans, want 2 (a lost connection, then the replay)", len(put))
	}
	invs, err := j.RunInvocations(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range put {
		a := attrs(s.Attributes)
		if s.Kind != tracepb.Span_SPAN_KIND_CLIENT || s.Name != "tools/call t" || a["mcp.method.name"] != "tools/call" || a["gen_ai.tool.name"] != "t" ||
			a[engine.AttrInvocationID] != invs[0].ID.String() || a[engine.AttrIdempotencyKey] != invs[0].IdempotencyKey || a[engine.AttrRunID] != run.ID.String() {
			t.Errorf("attempt span %s %v attributes %v", s.Name, s.Kind, a)
		}
		switch a[engine.AttrAttempt] {
		case "1":
			if a[engine.AttrReplay] != "false" || a[engine.AttrAttemptKind] != "first" || a[engine.AttrFailure] != "connection_lost" || a["error.type"] != "connection_lost" {
				t.Errorf("first attempt %v, want a first delivery that was lost", a)
			}
			var replayed bool
			for _, ev := range s.Events {
				if ev.Name == "mcpflow.replay" {
					e := attrs(ev.Attributes)
					replayed = e[engine.AttrVerdict] == "replay" && e[engine.AttrReason] != ""
				}
			}
			if !replayed {
				t.Errorf("first attempt's events %v, want mcpflow.replay", s.Events)
			}
		case "2":
			if a[engine.AttrReplay] != "true" || a[engine.AttrAttemptKind] != "replay" || a[engine.AttrState] != "completed" {
				t.Errorf("second attempt %v, want a completed replay", a)
			}
		default:
			t.Errorf("attempt %q", a[engine.AttrAttempt])
		}
	}
	var items int
	for _, s := range children[hex.EncodeToString(steps["each"].SpanId)] {
		if s.Name == "mcpflow.item" && len(attemptsOf(s)) == 1 {
			items++
		}
	}
	if items != 2 {
		t.Errorf("each has %d item spans with an attempt, want 2", items)
	}
	// The TypeScript SDK server got the echo attempt's span as traceparent.
	echo := attemptsOf(steps["echo"])
	if len(echo) != 1 {
		t.Fatalf("echo attempts %d", len(echo))
	}
	var echoInv *journal.Invocation
	for i := range invs {
		if invs[i].Step == "echo" {
			echoInv = &invs[i]
		}
	}
	var content []struct{ Text string }
	if echoInv == nil || json.Unmarshal(echoInv.Result.Content, &content) != nil || len(content) != 1 {
		t.Fatalf("echo result %+v", echoInv)
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(content[0].Text), &meta); err != nil {
		t.Fatal(err)
	}
	if want := "00-" + parentTrace + "-" + hex.EncodeToString(echo[0].SpanId) + "-01"; meta["traceparent"] != want {
		t.Errorf("the TypeScript server's _meta.traceparent %v, want %s (all of _meta: %v)", meta["traceparent"], want, meta)
	}
	if a := attrs(echo[0].Attributes); a["network.transport"] != "pipe" || a[engine.AttrTransport] != "stdio" || a["mcp.protocol.version"] == "" || a["error.type"] != "" {
		t.Errorf("echo attempt %v", a)
	}
}

// TestResumeContinuesTheTrace: a resumed run's span is a child of the
// first run's span, in its trace, from the traceparent journaled with the
// run.
func TestResumeContinuesTheTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	j := journaltest.Open(t, nil)
	sess := &flakySession{}
	eng := newEngine(j, sess)
	down := true
	eng.Connect = func(context.Context, string) (engine.Session, error) {
		if down {
			return nil, errors.New("connection refused")
		}
		return sess, nil
	}
	wf := load(t, "name: w\nservers: {s: {builtin: demo}}\nsteps: [{id: put, server: s, tool: t}]\n")
	run, err := eng.Run(context.Background(), wf, nil, "")
	if err != nil || run.Status != journal.RunFailed || run.TraceParent == "" {
		t.Fatalf("first run: %v %+v", err, run)
	}
	down = false
	sess.calls = 1 // the next call succeeds
	resumed, did, err := eng.Resume(context.Background(), run, wf, nil)
	if err != nil || !did || resumed.Status != journal.RunSucceeded {
		t.Fatalf("resume: %v %v %+v", err, did, resumed)
	}
	var runs []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "mcpflow.run" {
			runs = append(runs, s)
		}
	}
	if len(runs) != 2 {
		t.Fatalf("%d run spans, want 2", len(runs))
	}
	first, second := runs[0], runs[1]
	if second.SpanContext().TraceID() != first.SpanContext().TraceID() || second.Parent().SpanID() != first.SpanContext().SpanID() {
		t.Errorf("resumed run span in trace %s under %s, want trace %s under %s", second.SpanContext().TraceID(), second.Parent().SpanID(), first.SpanContext().TraceID(), first.SpanContext().SpanID())
	}
	var resumedAttr bool
	for _, a := range second.Attributes() {
		if string(a.Key) == engine.AttrResumed && a.Value.AsBool() {
			resumedAttr = true
		}
	}
	if !resumedAttr {
		t.Errorf("resumed run span attributes %v", second.Attributes())
	}
}
