package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

const mcpToken = "0123456789abcdef0123"

// withToken adds the bearer token to every request.
type withToken struct{ base http.RoundTripper }

func (w withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+mcpToken)
	return w.base.RoundTrip(r)
}

// mcpRig is a rig with a workflow in its workspace and a TCP listener
// that wants a token.
func mcpRig(t *testing.T) (*rig, string) {
	t.Helper()
	r := newRig(t, nil)
	wf := "name: shout\ndescription: Shout a word.\ninputs:\n  word: {type: string, required: true}\nsteps:\n" +
		"  - {id: up, server: demo, tool: upper, with: {text: \"${{ inputs.word }}\"}}\noutputs:\n  loud: ${{ steps.up.text }}\n"
	if err := os.WriteFile(filepath.Join(r.workspace, "shout.yaml"), []byte(wf), 0o600); err != nil {
		t.Fatal(err)
	}
	tcp, err := httpapi.New(&httpapi.Options{Service: r.svc, Workspace: r.workspace, Listen: "127.0.0.1:0", Token: mcpToken})
	if err != nil {
		t.Fatal(err)
	}
	if err := tcp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Stop(context.Background()) })
	return r, "http://" + tcp.Addr().String() + "/mcp"
}

// TestMCPEndpointBehindTheAPIChecks: /mcp answers only to the names the
// API answers to, with the API's token, and refuses a browser's request
// from another origin.
func TestMCPEndpointBehindTheAPIChecks(t *testing.T) {
	_, url := mcpRig(t)
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		name     string
		method   string
		header   map[string]string
		host     string
		status   int
		contains string
	}{
		{"no token", "POST", nil, "", 401, "a token is required"},
		{"no token, GET is not sent to the login page", "GET", nil, "", 401, "a token is required"},
		{"foreign host", "POST", map[string]string{"Authorization": "Bearer " + mcpToken}, "evil.example", 403, "DNS rebinding"},
		{"foreign origin", "POST", map[string]string{"Authorization": "Bearer " + mcpToken, "Origin": "http://evil.example"}, "", 403, "cross-origin requests are refused"},
		{"cross-site fetch", "POST", map[string]string{"Authorization": "Bearer " + mcpToken, "Sec-Fetch-Site": "cross-site"}, "", 403, "cross-site requests are refused"},
		{"token and loopback", "POST", map[string]string{"Authorization": "Bearer " + mcpToken}, "", 200, `"serverInfo":{"name":"mcpflow"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.method == "POST" {
				body = strings.NewReader(initialize)
			}
			req, _ := http.NewRequest(tc.method, url, body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.contains) {
				t.Errorf("%d %s\nwant %d with %q", resp.StatusCode, b, tc.status, tc.contains)
			}
		})
	}
}

// TestMCPToolRunsInTheServer: a workflow's tool called over streamable
// HTTP runs as a run the server owns, journaled, its outputs the result.
func TestMCPToolRunsInTheServer(t *testing.T) {
	r, url := mcpRig(t)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: withToken{http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, " ") != "list_runs shout show_run" {
		t.Fatalf("tools %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"word": "hey"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out["loud"] != "HEY" {
		t.Fatalf("result %+v", res)
	}
	runs, err := r.svc.Runs(service.RunQuery{Workflow: "shout"})
	if err != nil || len(runs) != 1 || runs[0].Run.Status != journal.RunSucceeded || runs[0].Run.ID.String() != res.Meta["mcpflow/run"] {
		t.Fatalf("runs %+v, %v; result _meta %v", runs, err, res.Meta)
	}
}
