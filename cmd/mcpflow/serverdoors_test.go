package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/client"
)

// The doors of `mcpflow server`, tried through a real server process with
// real HTTP requests: what a web page, a stranger's name for the server,
// or a request for a file outside the workspace can get (nothing).

// request sends method path (with body as JSON when not "") to base with
// the headers given, and returns the status and body.
func request(t *testing.T, client *http.Client, method, url, body string, header map[string]string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// socketClient speaks HTTP over the server's unix socket, as the CLI does.
func socketClient(c *cli) *http.Client {
	sock := filepath.Join(c.workspace, ".mcpflow", "mcpflow.sock")
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

// TestServerRefusesOtherHostNames: a page whose name was made to resolve
// to 127.0.0.1 (DNS rebinding) is same-origin with itself; the server
// refuses its Host before any handler runs — the decrypted export, a new
// run, the UI's form token — and answers the names it is reached by.
func TestServerRefusesOtherHostNames(t *testing.T) {
	c := newCLI(t)
	if r := c.run("run", repoFile("examples", "workflows", "hello.yaml"), "--input", "name=Ada"); r.code != 0 {
		t.Fatalf("run: %d\n%s", r.code, r.stderr)
	}
	base := startServer(t, c, "--allowed-host", "mcpflow.test")
	port := base[strings.LastIndex(base, ":")+1:]
	wf := c.workflow("hi.yaml", "name: hi\nservers:\n  demo: {builtin: demo}\nsteps:\n  - {id: hi, server: demo, tool: greet, with: {name: x}}\n")
	evil := map[string]string{"Host": "evil.example:" + port, "Origin": "http://evil.example:" + port, "Sec-Fetch-Site": "same-origin"}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/journal/export?decrypt=true", ""},
		{"GET", "/api/runs", ""},
		{"POST", "/api/runs", `{"file": "hi.yaml"}`},
		{"POST", "/api/calls", `{"server": "demo", "tool": "greet", "args": ["name=x"]}`},
		{"GET", "/", ""},
		{"GET", "/metrics", ""},
	} {
		code, body := request(t, http.DefaultClient, tc.method, base+tc.path, tc.body, evil)
		if code != http.StatusForbidden || !strings.Contains(body, "host_not_allowed") || !strings.Contains(body, "DNS rebinding") || strings.Contains(body, "Ada") {
			t.Errorf("%s %s as evil.example: %d\n%s", tc.method, tc.path, code, body)
		}
	}
	runs := func() int {
		var list struct {
			Runs []json.RawMessage `json:"runs"`
		}
		_, body := request(t, http.DefaultClient, "GET", base+"/api/runs", "", nil)
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("runs: %v\n%s", err, body)
		}
		return len(list.Runs)
	}
	if n := runs(); n != 1 {
		t.Fatalf("%d runs after the refused requests, want the 1 run before them", n)
	}

	// A page of another site may send requests it cannot read the answers
	// of: the API and the metrics refuse them, whatever the method.
	for _, path := range []string{"/api/servers", "/api/journal/export?decrypt=true", "/api/events", "/metrics"} {
		code, body := request(t, http.DefaultClient, "GET", base+path, "", map[string]string{"Sec-Fetch-Site": "cross-site"})
		if code != http.StatusForbidden || !strings.Contains(body, "cross_site") {
			t.Errorf("GET %s from another site: %d\n%s", path, code, body)
		}
	}

	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "mcpflow.test:" + port, "[::1]:" + port, "127.0.0.2"} {
		code, body := request(t, http.DefaultClient, "GET", base+"/api/journal/export?decrypt=true", "", map[string]string{"Host": host})
		if code != http.StatusOK || !strings.Contains(body, "Ada") {
			t.Errorf("export as %s: %d\n%s", host, code, body)
		}
	}
	// The unix socket, private to the journal's owner, answers whatever
	// the Host.
	if code, _ := request(t, socketClient(c), "POST", "http://evil.example/api/runs", `{"file": "`+wf+`"}`, nil); code != http.StatusAccepted {
		t.Errorf("a run over the socket: %d", code)
	}
}

// TestServerReadsWorkflowsOnlyFromWorkspace: the API loads workflow files
// only from inside the workspace, outside its .mcpflow, links followed;
// anything else is refused (403) without being read, and an error about a
// document's shape never quotes what the file holds. The CLI, going
// through the server, sends the workflow's text, so it runs a workflow
// from anywhere its user can read.
func TestServerReadsWorkflowsOnlyFromWorkspace(t *testing.T) {
	const secret = "sk-live-4f9a8b7c6d5e"
	c := newCLI(t)
	outside := t.TempDir()
	key := filepath.Join(outside, "token")
	c.writeFile(key, secret+"\n")
	c.writeFile(filepath.Join(c.workspace, ".mcpflow", "notes.yaml"), "name: x\n")
	if err := os.Symlink(key, filepath.Join(c.workspace, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	c.writeFile(filepath.Join(c.workspace, "scalar.yaml"), secret+"\n")
	c.workflow("greet.yaml", "name: greet\ninputs:\n  name: {type: string}\nservers:\n  demo: {builtin: demo}\nsteps:\n  - {id: hi, server: demo, tool: greet, with: {name: \"${{ inputs.name }}\"}}\n")
	c.writeFile(filepath.Join(c.workspace, "number.yaml"), "name: x\nservers:\n  demo: {builtin: demo}\nsteps:\n  - {id: a, server: demo, tool: greet, timeout: 31337x}\n")
	base := startServer(t, c)

	for _, client := range []*http.Client{http.DefaultClient, socketClient(c)} {
		url := base
		if client != http.DefaultClient {
			url = "http://mcpflow"
		}
		for _, tc := range []struct{ path, body string }{
			{"/api/runs", `{"file": "` + key + `"}`},
			{"/api/runs", `{"file": "../` + filepath.Base(outside) + `/token"}`},
			{"/api/runs", `{"file": "link.yaml"}`},
			{"/api/runs", `{"file": ".mcpflow/notes.yaml"}`},
			{"/api/runs", `{"file": ".mcpflow/journal.db"}`},
			{"/api/calls", `{"server": "demo", "tool": "greet", "workflow": "` + key + `"}`},
			{"/api/runs", `{"file": "greet.yaml", "input_pairs": ["name=@` + key + `"]}`},
		} {
			code, body := request(t, client, "POST", url+tc.path, tc.body, nil)
			if code != http.StatusForbidden || !strings.Contains(body, `"forbidden"`) || strings.Contains(body, secret) {
				t.Errorf("POST %s %s: %d\n%s", tc.path, tc.body, code, body)
			}
		}
		for _, file := range []string{"scalar.yaml", "number.yaml"} {
			code, body := request(t, client, "POST", url+"/api/runs", `{"file": "`+file+`"}`, nil)
			if code != http.StatusBadRequest || !strings.Contains(body, file+`:`) || strings.Contains(body, secret) || strings.Contains(body, "31337") {
				t.Errorf("POST /api/runs %s: %d\n%s", file, code, body)
			}
		}
	}

	// A workflow's text is taken over the socket, from the journal's owner;
	// over TCP it is refused: it could declare a server that runs any
	// command as the server's user. The CLI sends the text of a workflow
	// outside the workspace through the socket.
	hi := "name: hi\nservers:\n  demo: {builtin: demo}\nsteps:\n  - {id: hi, server: demo, tool: greet, with: {name: inline}}\n"
	b, _ := json.Marshal(map[string]string{"file": "/elsewhere/hi.yaml", "source": hi})
	if code, body := request(t, http.DefaultClient, "POST", base+"/api/runs", string(b), nil); code != http.StatusForbidden || !strings.Contains(body, "unix socket") {
		t.Errorf("an inline workflow over TCP: %d\n%s", code, body)
	}
	b, _ = json.Marshal(map[string]string{"server": "demo", "tool": "greet", "workflow_source": hi})
	if code, body := request(t, http.DefaultClient, "POST", base+"/api/calls", string(b), nil); code != http.StatusForbidden {
		t.Errorf("a call with an inline workflow over TCP: %d\n%s", code, body)
	}
	b, _ = json.Marshal(map[string]string{"file": "/elsewhere/hi.yaml", "source": hi})
	if code, body := request(t, socketClient(c), "POST", "http://mcpflow/api/runs", string(b), nil); code != http.StatusAccepted {
		t.Errorf("an inline workflow over the socket: %d\n%s", code, body)
	}
	away := filepath.Join(outside, "away.yaml")
	c.writeFile(away, strings.ReplaceAll(hi, "inline", "away"))
	if r := c.run("run", away); r.code != 0 || !strings.Contains(r.stdout, "Hello, away!") {
		t.Errorf("mcpflow run of a workflow outside the workspace, through the server: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("call", "demo", "greet", "--arg", "name=there", "--workflow", away); r.code != 0 || !strings.Contains(r.stdout, "Hello, there!") {
		t.Errorf("mcpflow call --workflow outside the workspace, through the server: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestServerSocketNeverReplacesAFile: --socket removes only a stale socket
// (one nothing answers on); a file, a directory or a link there is
// refused and left as it was.
func TestServerSocketNeverReplacesAFile(t *testing.T) {
	c := newCLI(t)
	file := filepath.Join(c.workspace, "precious.txt")
	c.writeFile(file, "keep me\n")
	r := c.run("server", "--socket", file)
	if r.code == 0 || !strings.Contains(r.stderr, "not a socket") {
		t.Errorf("--socket on a regular file: exit %d\n%s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me\n" {
		t.Fatalf("the file at --socket: %q, %v", b, err)
	}

	// A stale socket is replaced: its server died without removing it.
	stale := filepath.Join(c.workspace, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	cmd, wait := c.background("server", "--socket", stale, "--grace", "100ms")
	deadline := time.Now().Add(20 * time.Second)
	for !client.On(stale) {
		if time.Now().After(deadline) {
			r := wait()
			t.Fatalf("no server on the stale socket's path: exit %d\n%s", r.code, r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.stopServer(cmd, wait)
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the socket is left after the server stopped: %v", err)
	}

	// A file put in the socket's place while the server ran is not the
	// server's to remove when it stops.
	sock := filepath.Join(c.workspace, "own.sock")
	cmd, wait = c.background("server", "--socket", sock, "--grace", "100ms")
	for !client.On(sock) {
		if time.Now().After(deadline) {
			r := wait()
			t.Fatalf("no server on %s: exit %d\n%s", sock, r.code, r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	c.writeFile(sock, "keep me\n")
	c.stopServer(cmd, wait)
	if b, err := os.ReadFile(sock); err != nil || string(b) != "keep me\n" {
		t.Errorf("the file put in the socket's place, after the server stopped: %q, %v", b, err)
	}
}
