package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/upstream/demo"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolListShared: two sessions whose servers list the same tools hold
// one map between them; once one server's tools change, its session
// lists them afresh and holds a map of its own.
func TestToolListShared(t *testing.T) {
	connect := func(srv *mcp.Server) *Session {
		url, _ := serveStreamable(t, srv, false)
		s, err := Connect(context.Background(), &Server{Name: "same", URL: url}, &Options{Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	srvA := mcp.NewServer(&mcp.Implementation{Name: "a", Version: "1"}, nil)
	srvA.AddTool(echoTool("echo"))
	srvB := mcp.NewServer(&mcp.Implementation{Name: "b", Version: "1"}, nil)
	srvB.AddTool(echoTool("echo"))
	a, b := connect(srvA), connect(srvB)
	ta, err := a.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(ta).UnsafePointer() != reflect.ValueOf(tb).UnsafePointer() {
		t.Error("two sessions listing the same tools hold two maps")
	}
	if n := len(a.tap.annotated); n != 0 {
		t.Errorf("the tap keeps %d tools after the listing", n)
	}

	srvB.AddTool(echoTool("more"))
	waitFor(t, "notifications/tools/list_changed", b.toolsStale.Load)
	tb, err = b.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tb["more"]; !ok || len(tb) != 2 {
		t.Fatalf("after list_changed, tools %v; want echo and more", tb)
	}
	if _, ok := ta["more"]; ok || len(ta) != 1 {
		t.Errorf("the other session's tools changed with it: %v", ta)
	}
}

// TestToolsKey: lists differ in their keys whenever a field differs, an
// absent field and an empty one included, and however the bytes of
// neighbouring fields could be cut.
func TestToolsKey(t *testing.T) {
	base := map[string]Tool{"a": {Name: "a", Description: "d", InputSchema: json.RawMessage(`{}`)}}
	lists := []map[string]Tool{
		base,
		{"a": {Name: "a", Description: "d", InputSchema: json.RawMessage(`{}`), Annotations: json.RawMessage{}}},
		{"a": {Name: "a", Description: "d", InputSchema: json.RawMessage(`{}`), Annotations: json.RawMessage(`{}`)}},
		{"a": {Name: "a", Description: "d", InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{}`)}},
		{"a": {Name: "a", Description: "", InputSchema: json.RawMessage(`d{}`)}},
		{"a": {Name: "a", Description: "d", InputSchema: json.RawMessage(`{}`)}, "b": {Name: "b"}},
		{"ab": {Name: "ab", Description: "d", InputSchema: json.RawMessage(`{}`)}},
	}
	seen := map[string]int{}
	for i, l := range lists {
		k := toolsKey(l)
		if j, ok := seen[k]; ok {
			t.Errorf("lists %d and %d have one key", j, i)
		}
		seen[k] = i
	}
	same := map[string]Tool{"a": {Name: "a", Description: "d", InputSchema: json.RawMessage(`{}`)}}
	if toolsKey(same) != toolsKey(base) {
		t.Error("two equal lists have different keys")
	}
}

// TestConnectListsTools: with ListTools, Connect lists every page of the
// tools while the session opens, and the first Tools call asks nothing;
// without it, or of a server that declares no tools, Connect lists none.
func TestConnectListsTools(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		url := serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0", PageSize: 2})
		pages := (len(declaredAnnotations) + 1 + 1) / 2
		for _, list := range []bool{true, false} {
			wire := newWireCounter(t)
			s := connect(t, &Server{Name: "paged", URL: url}, &Options{HTTPClient: &http.Client{Transport: wire}, ListTools: list})
			want := 0
			if list {
				want = pages
			}
			if got := wire.count("tools/list"); got != want {
				t.Errorf("ListTools %v: %d tools/list requests by Connect, want %d", list, got, want)
			}
			checkDiscovery(t, s)
			if got := wire.count("tools/list"); got != pages {
				t.Errorf("ListTools %v: %d tools/list requests after Tools, want %d", list, got, pages)
			}
		}
	})
	t.Run("stdio", func(t *testing.T) {
		s := connect(t, &Server{Name: "demo", Builtin: "demo"}, &Options{Self: self(t), Workspace: t.TempDir(), ListTools: true})
		s.toolsMu.Lock()
		listed := s.tools != nil
		s.toolsMu.Unlock()
		if !listed {
			t.Error("Connect with ListTools left the tools unlisted")
		}
		checkDiscovery(t, s)
	})
	t.Run("no tools", func(t *testing.T) {
		url, _ := serveStreamable(t, mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil), false)
		wire := newWireCounter(t)
		connect(t, &Server{Name: "bare", URL: url}, &Options{HTTPClient: &http.Client{Transport: wire}, ListTools: true})
		if got := wire.count("tools/list"); got != 0 {
			t.Errorf("%d tools/list requests to a server without tools", got)
		}
	})
}

// TestConnectListingRefused: a server that refuses tools/list at connect
// is asked once; the first Tools call reports its answer, the next asks
// again.
func TestConnectListingRefused(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "refuses", Version: "1"}, nil)
	srv.AddTool(echoTool("echo"))
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return nil, errors.New("no listing today")
			}
			return next(ctx, method, req)
		}
	})
	url, _ := serveStreamable(t, srv, false)
	wire := newWireCounter(t)
	s := connect(t, &Server{Name: "refuses", URL: url}, &Options{HTTPClient: &http.Client{Transport: wire}, ListTools: true})
	if got := wire.count("tools/list"); got != 1 {
		t.Fatalf("%d tools/list requests by Connect, want 1", got)
	}
	if _, err := s.Tools(context.Background()); err == nil || !strings.Contains(err.Error(), "no listing today") {
		t.Fatalf("first Tools: %v, want the server's refusal", err)
	}
	if got := wire.count("tools/list"); got != 1 {
		t.Errorf("%d tools/list requests after the first Tools, want 1: it reports the listing at connect", got)
	}
	if _, err := s.Tools(context.Background()); err == nil {
		t.Fatal("second Tools succeeded")
	}
	if got := wire.count("tools/list"); got != 2 {
		t.Errorf("%d tools/list requests after the second Tools, want 2", got)
	}
}
