package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestRunExportsTracesAtExit: `mcpflow run` with an OTLP endpoint in the
// environment exports its spans before it exits (a short CLI run loses
// none), in the trace of the TRACEPARENT it was started with; without one
// nothing is sent. Through `mcpflow server` (which exports), the run the
// server starts for the command joins the command's TRACEPARENT too.
func TestRunExportsTracesAtExit(t *testing.T) {
	var mu sync.Mutex
	names := map[string]string{} // span name → trace id
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[s.Name] = hex.EncodeToString(s.TraceId)
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	defer hs.Close()
	hello := abs(t, repoFile("examples", "workflows", "hello.yaml"))

	c := newCLI(t)
	if r := c.run("run", hello, "--input", "name=Ada"); r.code != 0 {
		t.Fatalf("run without tracing: exit %d\n%s", r.code, r.stderr)
	}
	mu.Lock()
	if len(names) != 0 {
		t.Errorf("spans exported with tracing off: %v", names)
	}
	mu.Unlock()

	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	c.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + hs.URL, "TRACEPARENT=00-" + trace + "-00f067aa0ba902b7-01"}
	if r := c.run("run", hello, "--input", "name=Ada"); r.code != 0 {
		t.Fatalf("run with tracing: exit %d\n%s", r.code, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"mcpflow.run", "mcpflow.step", "tools/call greet", "mcpflow.journal.commit"} {
		if _, ok := names[name]; !ok {
			t.Errorf("no %s span exported (got %v)", name, names)
		}
	}
	if names["mcpflow.run"] != trace || names["tools/call greet"] != trace {
		t.Errorf("run in trace %s, call in %s, want TRACEPARENT's %s", names["mcpflow.run"], names["tools/call greet"], trace)
	}
	clear(names)
	mu.Unlock()

	// The server exports; the command only carries its TRACEPARENT.
	const viaServer = "0af7651916cd43dd8448eb211c80319c"
	c.env = nil
	srv, stopped := c.startServer("OTEL_EXPORTER_OTLP_ENDPOINT=" + hs.URL)
	c.env = []string{"TRACEPARENT=00-" + viaServer + "-b7ad6b7169203331-01"}
	if r := c.run("run", hello, "--input", "name=Ada"); r.code != 0 {
		t.Fatalf("run through the server: exit %d\n%s", r.code, r.stderr)
	}
	c.env = nil
	c.stopServer(srv, stopped) // flushes the server's spans
	mu.Lock()
	if names["mcpflow.run"] != viaServer || names["tools/call greet"] != viaServer {
		t.Errorf("through the server: run in trace %q, call in %q, want the command's TRACEPARENT %s (spans %v)", names["mcpflow.run"], names["tools/call greet"], viaServer, names)
	}
}
