package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"
)

func TestParseEntryRoots(t *testing.T) {
	src := `name: w
servers:
  none: {builtin: demo}
  empty: {builtin: demo, roots: []}
  some:
    command: srv
    roots: [data, /srv/shared, "file:///var/lib/x%20y", ~/notes]
`
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"none", nil},
		{"empty", []string{}},
		{"some", []string{"data", "/srv/shared", "file:///var/lib/x%20y", "~/notes"}},
	} {
		srv, err := ParseEntry("wf.yaml", tc.name, entryNode(t, src, tc.name))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (srv.Roots == nil) != (tc.want == nil) || !slices.Equal(srv.Roots, tc.want) {
			t.Errorf("%s: Roots = %#v, want %#v", tc.name, srv.Roots, tc.want)
		}
	}
	srv, _ := ParseEntry("wf.yaml", "some", entryNode(t, src, "some"))
	if got := srv.rootsAt[1]; got != (filePos{"wf.yaml", 7, 19}) {
		t.Errorf("roots[1] read at %v, want wf.yaml:7:19", got)
	}
}

func TestParseEntryRootErrors(t *testing.T) {
	const want = "(expected a directory path, relative to the workspace, or a file:///ABSOLUTE/PATH URI"
	for _, tc := range []struct{ roots, want string }{
		{`[data, "https://example.com/x"]`, `wf.yaml:4:35: server s: roots[1]: root "https://example.com/x" is not a file:// URI ` + want + `: MCP roots are local directories)`},
		{`["file://fileserver/share"]`, `wf.yaml:4:29: server s: roots[0]: root "file://fileserver/share" names host "fileserver" ` + want + `: MCP roots are local directories)`},
		{`["file://relative"]`, `wf.yaml:4:29: server s: roots[0]: root "file://relative" names host "relative" ` + want + `: MCP roots are local directories)`},
		{`["file:///x?y=1"]`, `wf.yaml:4:29: server s: roots[0]: root "file:///x?y=1" has a query, fragment or user ` + want + `)`},
		{`["file://localhost"]`, `wf.yaml:4:29: server s: roots[0]: root "file://localhost" has no absolute path ` + want + `)`},
		{`["${HOME}/x"]`, `wf.yaml:4:29: server s: roots[0]: root "${HOME}/x": roots are not expanded ` + want + `; ~/ is the home directory)`},
		{`[""]`, `wf.yaml:4:29: server s: roots[0]: empty root ` + want + `)`},
		{`data`, `wf.yaml:4:28: server s: roots: expected a list of strings, found a string`},
		{`[[a]]`, `wf.yaml:4:29: server s: roots[0]: expected a string, found a list`},
		{``, `wf.yaml:4:28: server s: roots: expected a list of strings, found nothing`},
	} {
		src := "name: w\nservers:\n  s:\n    {builtin: demo, roots: " + tc.roots + "}\n"
		_, err := ParseEntry("wf.yaml", "s", entryNode(t, src, "s"))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("roots: %s: err = %v, want a *ConfigError", tc.roots, err)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("roots: %s:\n got  %s\n want %s", tc.roots, err, tc.want)
		}
	}
	// Validate (entries built in Go, or read from JSON) checks the same.
	srv := &Server{Name: "s", Builtin: "demo", Roots: []string{"ftp://h/x"}}
	if err := srv.Validate(); err == nil || !strings.Contains(err.Error(), `roots[0]: root "ftp://h/x" is not a file:// URI`) {
		t.Errorf("Validate: %v", err)
	}
}

func TestServerRoots(t *testing.T) {
	ws := t.TempDir()
	other := t.TempDir()
	for _, d := range []string{"data", "a b"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "file.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	uris := func(roots []*mcp.Root) (out []string) {
		for _, r := range roots {
			out = append(out, r.Name+"="+r.URI)
		}
		return out
	}
	for _, tc := range []struct {
		roots []string
		want  []string
	}{
		{nil, []string{"workspace=file://" + ws}},
		{[]string{}, nil},
		{[]string{"data", "a b", other, "file://" + other + "/", "file://localhost" + ws + "/a%20b", "."}, []string{
			"data=file://" + ws + "/data",
			"a b=file://" + ws + "/a%20b",
			other + "=file://" + other,
			"file://" + other + "/=file://" + other,
			"file://localhost" + ws + "/a%20b=file://" + ws + "/a%20b",
			".=file://" + ws,
		}},
	} {
		srv := &Server{Name: "s", Builtin: "demo", Roots: tc.roots}
		got, err := srv.roots(ws)
		if err != nil {
			t.Fatalf("%q: %v", tc.roots, err)
		}
		if got == nil || !slices.Equal(uris(got), tc.want) {
			t.Errorf("roots %q:\n got  %q\n want %q", tc.roots, uris(got), tc.want)
		}
	}

	// A root that is not an existing directory fails, naming where it
	// was written.
	src := "name: w\nservers:\n  s:\n    builtin: demo\n    roots: [data, file.txt, missing]\n"
	srv, err := ParseEntry("wf.yaml", "s", entryNode(t, src, "s"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = srv.roots(ws)
	want := `wf.yaml:5:19: server s: roots[1]: ` + filepath.Join(ws, "file.txt") + ` is not a directory (expected a directory, not a file)`
	if err == nil || err.Error() != want || !errors.Is(err, ErrConfig) {
		t.Errorf("a file as a root:\n got  %v\n want %s", err, want)
	}
	src = "name: w\nservers:\n  s:\n    builtin: demo\n    roots: [missing]\n"
	if srv, err = ParseEntry("wf.yaml", "s", entryNode(t, src, "s")); err != nil {
		t.Fatal(err)
	}
	_, err = srv.roots(ws)
	want = `wf.yaml:5:13: server s: roots[0]: ` + filepath.Join(ws, "missing") + `: no such directory (expected an existing directory; a relative root is relative to the workspace)`
	if err == nil || err.Error() != want {
		t.Errorf("a missing root:\n got  %v\n want %s", err, want)
	}
}

func TestInheritRoots(t *testing.T) {
	src := "name: w\nroots: [data]\n"
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	rl, err := ParseRoots("wf.yaml", doc.Content[0].Content[3])
	if err != nil {
		t.Fatal(err)
	}
	entry := &Server{Name: "s", Builtin: "demo"}
	own := &Server{Name: "o", Builtin: "demo", Roots: []string{"mine"}}
	none := &Server{Name: "n", Builtin: "demo", Roots: []string{}}
	got := entry.InheritRoots(rl)
	if got == entry || !slices.Equal(got.Roots, []string{"data"}) {
		t.Errorf("inherited: %p %q", got, got.Roots)
	}
	if entry.Roots != nil || entry.rootsAt != nil {
		t.Errorf("the entry given changed: %q %v", entry.Roots, entry.rootsAt)
	}
	// Where the inherited root was written is where its problems point.
	err = got.CheckRoots(t.TempDir())
	if ce := (*ConfigError)(nil); !errors.As(err, &ce) || ce.File != "wf.yaml" || ce.Line != 2 || ce.Column != 9 || !strings.HasPrefix(ce.Message(), "server s: roots[0]: ") {
		t.Errorf("a missing inherited root: %v", err)
	}
	if own.InheritRoots(rl) != own || none.InheritRoots(rl) != none {
		t.Error("an entry's own roots (even none) gave way to the workflow's")
	}
	if got := entry.InheritRoots(&RootList{Roots: []string{}}); got.Roots == nil || len(got.Roots) != 0 {
		t.Errorf("roots: [] inherited as %#v, want an empty list", got.Roots)
	}
	if entry.InheritRoots(nil) != entry {
		t.Error("no workflow roots changed the entry")
	}
}

// TestRootsJSON: nil (the workspace) and [] (none) survive a round trip.
func TestRootsJSON(t *testing.T) {
	for _, tc := range []struct {
		roots []string
		json  string
	}{{nil, ""}, {[]string{}, `"roots":[]`}, {[]string{"a"}, `"roots":["a"]`}} {
		b, err := json.Marshal(Server{Name: "s", Builtin: "demo", Roots: tc.roots})
		if err != nil {
			t.Fatal(err)
		}
		if tc.json == "" && strings.Contains(string(b), "roots") || !strings.Contains(string(b), tc.json) {
			t.Errorf("%#v: %s", tc.roots, b)
		}
		var back Server
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if (back.Roots == nil) != (tc.roots == nil) || !slices.Equal(back.Roots, tc.roots) {
			t.Errorf("%#v came back as %#v", tc.roots, back.Roots)
		}
	}
}

// TestRootsOnTheWire: a server asks for the roots (roots/list) and gets the
// workspace by default, the configured roots, or none — with the roots
// capability declared in every case.
func TestRootsOnTheWire(t *testing.T) {
	type seen struct {
		Declared bool     `json:"declared"`
		URIs     []string `json:"uris"`
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "roots", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, seen, error) {
		var out seen
		if p := req.Session.InitializeParams(); p != nil && p.Capabilities != nil {
			out.Declared = p.Capabilities.RootsV2 != nil
		}
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, out, err
		}
		out.URIs = []string{}
		for _, r := range res.Roots {
			out.URIs = append(out.URIs, r.URI)
		}
		return nil, out, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(hs.Close)

	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		roots []string
		want  []string
	}{
		{nil, []string{"file://" + ws}},
		{[]string{"data"}, []string{"file://" + ws + "/data"}},
		{[]string{}, []string{}},
	} {
		s := connect(t, &Server{Name: "r", URL: hs.URL, Roots: tc.roots}, &Options{Workspace: ws})
		res, err := s.Call(context.Background(), "roots", json.RawMessage(`{}`), nil, nil)
		if err != nil {
			t.Fatalf("roots %q: %v", tc.roots, err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var got seen
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !got.Declared || !slices.Equal(got.URIs, tc.want) || got.URIs == nil {
			t.Errorf("roots %q: the server saw %s, want the capability declared and %q", tc.roots, b, tc.want)
		}
		s.Close()
	}

	// A root that is not a directory fails Connect before anything starts.
	_, err := Connect(context.Background(), &Server{Name: "r", URL: hs.URL, Roots: []string{"nope"}}, &Options{Workspace: ws})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `server r: roots[0]: `+filepath.Join(ws, "nope")+": no such directory") {
		t.Errorf("Connect with a missing root: %v", err)
	}
}
