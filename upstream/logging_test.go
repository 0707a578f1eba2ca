package upstream

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/upstream/demo"
)

func TestLogLine(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		params mcp.LoggingMessageParams
		want   string
	}{
		{mcp.LoggingMessageParams{Level: "info", Logger: "db", Data: "connected"}, `2026-01-02T02:04:05.678Z [info] db: connected`},
		{mcp.LoggingMessageParams{Level: "error", Data: "no logger"}, `2026-01-02T02:04:05.678Z [error] no logger`},
		{mcp.LoggingMessageParams{Level: "warning", Logger: "q", Data: map[string]any{"n": 2, "a": []any{"x"}}}, `2026-01-02T02:04:05.678Z [warning] q: {"a":["x"],"n":2}`},
		{mcp.LoggingMessageParams{Level: "info", Data: "two\nlines"}, `2026-01-02T02:04:05.678Z [info] "two\nlines"`},
		{mcp.LoggingMessageParams{Level: "info\n", Logger: "a\rb", Data: nil}, `2026-01-02T02:04:05.678Z ["info\n"] "a\rb": null`},
	} {
		if got := logLine(at, &tc.params); got != tc.want {
			t.Errorf("logLine(%+v) = %q, want %q", tc.params, got, tc.want)
		}
	}
	long := logLine(at, &mcp.LoggingMessageParams{Level: "info", Data: strings.Repeat("é", maxLogData)})
	if n := len(long); n > maxLogData+64 || !strings.HasSuffix(long, "…") || strings.ContainsRune(long, '\uFFFD') {
		t.Errorf("a long message is %d bytes, ends %q", n, long[len(long)-8:])
	}
}

// TestLogNotifications: a server's notifications/message at info and above
// land in its log file, one line each, on every transport — on stdio
// (protocol 2026-07-28: the level travels in the call's _meta) beside the
// server's stderr, and on http and sse (logging/setLevel) in a file of
// their own. The debug message the demo also sends is not asked for.
func TestLogNotifications(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  func(t *testing.T) *Server
	}{
		{"stdio", func(*testing.T) *Server { return &Server{Name: "stdio", Builtin: "demo"} }},
		{"http", func(t *testing.T) *Server {
			return &Server{Name: "http", URL: serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0"})}
		}},
		{"sse", func(t *testing.T) *Server {
			return &Server{Name: "sse", Type: "sse", URL: serveDemoHTTP(t, demo.Config{SSEAddr: "127.0.0.1:0"})}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			s := connectDemo(t, tc.srv(t), ws)
			for _, args := range []string{`{"message":"first"}`, `{"message":"second, with {data}","level":"error"}`} {
				res, err := s.Call(context.Background(), "log", json.RawMessage(args), map[string]any{"io.mcpflow/idempotency-key": "k"}, nil)
				if err != nil || res.IsError {
					t.Fatalf("log %s: %v %+v", args, err, res)
				}
			}
			// Close waits for the notifications read before the replies.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(ws, ".mcpflow", "logs", tc.name+".log")
			if s.LogPath() != path {
				t.Errorf("LogPath() = %q, want %q", s.LogPath(), path)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				if strings.Contains(l, " demo: ") {
					lines = append(lines, l)
				}
			}
			want := []*regexp.Regexp{
				regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[info\] demo: first$`),
				regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[error\] demo: second, with \{data\}$`),
			}
			if len(lines) != len(want) {
				t.Fatalf("log has %d demo lines, want %d:\n%s", len(lines), len(want), b)
			}
			for i, re := range want {
				if !re.MatchString(lines[i]) {
					t.Errorf("log line %d = %q, want %s", i+1, lines[i], re)
				}
			}
			if strings.Contains(string(b), "debug detail") {
				t.Errorf("a debug message was logged though info was asked for:\n%s", b)
			}
			for p, mode := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode() != mode {
					t.Errorf("%s: mode %v, want %v", p, st.Mode(), mode)
				}
			}
		})
	}
}
