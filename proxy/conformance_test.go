package proxy_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The official MCP conformance suite's server scenarios pass through
// mcpflow proxy (served over streamable HTTP with --http) in front of a
// server that passes them itself: go-sdk's conformance everything-server,
// built from the go-sdk version go.mod pins, over stdio. Every scenario
// passes, dns-rebinding-protection included; and every tools/call the
// suite made is in the journal.
func TestConformanceThroughTheProxy(t *testing.T) {
	bin, npm := node(t)
	dir := t.TempDir()
	everything := filepath.Join(dir, "everything-server")
	build := exec.Command("go", "build", "-o", everything, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build everything-server: %v\n%s", err, out)
	}
	w := newWorkspace(t, "servers:\n  everything:\n    command: "+everything+"\n")
	proxy := exec.Command(mcpflowBin, "--workspace", w.dir, "proxy", "everything", "--http", "127.0.0.1:0")
	proxy.Env = w.environ()
	stderr, err := proxy.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Process.Kill(); proxy.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`at (http://\S+/mcp)$`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
			t.Log("proxy: " + sc.Text())
		}
	}()
	var url string
	select {
	case url = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("mcpflow proxy --http did not say where it serves")
	}
	suite := exec.Command(bin, filepath.Join(npm, "node_modules", ".bin", "conformance"), "server", "--url", url, "-o", filepath.Join(dir, "results"))
	suite.Dir = dir
	suite.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	out, err := suite.CombinedOutput()
	summary := string(out)
	if i := strings.Index(summary, "=== SUMMARY ==="); i >= 0 {
		summary = summary[i:]
	}
	t.Log(summary)
	if err != nil {
		t.Fatalf("the conformance suite failed through the proxy: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`dns-rebinding-protection: [1-9]\d* passed, 0 failed`).MatchString(summary) {
		t.Errorf("dns-rebinding-protection did not pass:\n%s", summary)
	}
	// The suite's calls are journaled, one run per MCP session.
	var invs []struct {
		Tool string `json:"tool"`
	}
	w.mcpflowJSON(&invs, "journal", "list", "--limit", "1000")
	tools := map[string]bool{}
	for _, inv := range invs {
		tools[inv.Tool] = true
	}
	for _, want := range []string{"test_simple_text", "test_tool_with_progress", "test_elicitation", "test_sampling"} {
		if !tools[want] {
			t.Errorf("journal: no call of %s (have %v)", want, tools)
		}
	}
}
