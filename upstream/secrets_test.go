package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/upstream/demo"
)

// TestSecretSet: values are counted per holder and scrubbed in one pass,
// the longest first; in JSON from strings, keys and numbers.
func TestSecretSet(t *testing.T) {
	var s secretSet
	if got := s.scrub("nothing held"); got != "nothing held" {
		t.Errorf("empty set: %q", got)
	}
	s.add([]string{"abc", "abcdef", ""})
	s.add([]string{"abc", "e"})
	for in, want := range map[string]string{
		"x abcdef y abc z": "x [redacted] y [redacted] z", // the longer secret whole
		"the":              "th[redacted]",                // one pass: Redacted's own e stays
	} {
		if got := s.scrub(in); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
	s.remove([]string{"abc", "e"}) // abc is still held by the first holder
	if got := s.scrub("abc e"); got != "[redacted] e" {
		t.Errorf("after one release: %q", got)
	}
	s.remove([]string{"abc", "abcdef", "never held"})
	if got := s.scrub("abc abcdef"); got != "abc abcdef" || s.current() != nil {
		t.Errorf("after every release: %q", got)
	}

	s.add([]string{`pa"ss`, "4417"})
	for _, tc := range []struct{ in, want string }{
		{`{"data":"x pa\"ss y","n":4417,"m":44170,"pa\"ss":[true,"4417"]}`, `{"[redacted]":[true,"[redacted]"],"data":"x [redacted] y","m":44170,"n":"[redacted]"}`},
		{`{"data":"clean","n":1}`, `{"data":"clean","n":1}`}, // untouched, byte for byte
		{`not json pa"ss`, `not json pa"ss`},
	} {
		if got := string(s.scrubJSON(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("scrubJSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// collector is a log the pump writes to.
type collector struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (c *collector) write(b []byte) {
	c.mu.Lock()
	c.b.Write(b)
	c.mu.Unlock()
}

func (c *collector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// TestStderrPump: whole lines reach the log scrubbed; a drain returns once
// what was written before it is scrubbed with the secrets held then, a
// started line included; a long line is cut without cutting a secret; the
// last bytes are written at close, ended with a line break.
func TestStderrPump(t *testing.T) {
	var secrets secretSet
	var log collector
	p, err := newStderrPump(&secrets, log.write)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	write := func(s string) {
		t.Helper()
		if _, err := p.w.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	secrets.add([]string{"SECRET"})
	write("one SEC")
	write("RET one\ntwo SECRET")
	p.drain() // everything above is read, with SECRET still held
	if got, want := log.String(), "one [redacted] one\n"; got != want {
		t.Errorf("after the drain the log is %q, want %q", got, want)
	}
	secrets.remove([]string{"SECRET"})
	write(" two\n")
	long := strings.Repeat("x", maxStderrLine-3)
	secrets.add([]string{"LONGSECRET"})
	write(long + "LONGSECRET" + long + "\n")
	write("last, unended")
	p.close()
	p.close() // idempotent
	want := "one [redacted] one\ntwo [redacted] two\n" + long + "[redacted]" + long + "\nlast, unended\n"
	if got := log.String(); got != want {
		t.Errorf("log:\n%.200q…\nwant:\n%.200q…", got, want)
	}
	p.drain() // after close: at once
}

func TestMarkerStart(t *testing.T) {
	marker := []byte("\x00mark\x00")
	for in, want := range map[string]int{"": 0, "abc": 0, "abc\x00": 1, "abc\x00ma": 3, "\x00mark": 5, "\x00mark\x00": 1, "m": 0} {
		if got := markerStart([]byte(in), marker); got != want {
			t.Errorf("markerStart(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestSessionScrubsSecretsFromLog: what a real server says about secret
// arguments — log messages on every transport, stderr on stdio — reaches
// its log scrubbed of the secrets every holder lends the session, for as
// long as one holds them.
func TestSessionScrubsSecretsFromLog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		srv    func(t *testing.T) *Server
		stderr bool
	}{
		{"stdio", func(*testing.T) *Server { return &Server{Name: "stdio", Builtin: "demo"} }, true},
		{"http", func(t *testing.T) *Server {
			return &Server{Name: "http", URL: serveDemoHTTP(t, demo.Config{HTTPAddr: "127.0.0.1:0"})}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			s := connectDemo(t, tc.srv(t), ws)
			say := func(word string) {
				t.Helper()
				args, _ := json.Marshal(map[string]any{"message": word + " pw-A pw-B", "stderr": true})
				res, err := s.Call(context.Background(), "log", args, map[string]any{"io.mcpflow/idempotency-key": word}, nil)
				if err != nil || res.IsError {
					t.Fatalf("log %s: %v %+v", args, err, res)
				}
			}
			first := s.HoldSecrets([]string{"pw-A"})
			second := s.HoldSecrets([]string{"pw-A", "pw-B"})
			say("one")
			first()
			first() // idempotent: pw-A stays held by the second
			say("two")
			second() // whatever the server said before is in the log, scrubbed
			say("three")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(s.LogPath())
			if err != nil {
				t.Fatal(err)
			}
			log := string(b)
			for _, want := range []string{
				" one [redacted] [redacted]\n", " two [redacted] [redacted]\n", " three pw-A pw-B\n",
			} {
				if n, wantN := strings.Count(log, want), map[bool]int{true: 2, false: 1}[tc.stderr]; n != wantN {
					t.Errorf("the log holds %q %d times, want %d (log message and stderr):\n%s", want, n, wantN, log)
				}
			}
			if n := strings.Count(log, "pw-"); n != map[bool]int{true: 4, false: 2}[tc.stderr] {
				t.Errorf("secrets held show in the log:\n%s", log)
			}
		})
	}
}

// TestStderrPumpEnds: closing a session ends its pump's goroutine, and a
// server's stderr written just before it exits is in the log.
func TestStderrPumpEnds(t *testing.T) {
	ws := t.TempDir()
	s := connectDemo(t, &Server{Name: "demo", Builtin: "demo"}, ws)
	if _, err := s.Call(context.Background(), "log", json.RawMessage(`{"message":"bye","stderr":true}`), nil, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.stderr.done:
	default:
		t.Fatal("the stderr pump runs on after Close")
	}
	if d := time.Since(start); d > stderrGrace {
		t.Errorf("Close took %s: it waited for stderr's end", d)
	}
	b, _ := os.ReadFile(s.LogPath())
	if !strings.Contains(string(b), "\ndemo: log info: bye\n") && !strings.HasPrefix(string(b), "demo: log info: bye\n") {
		t.Errorf("log %q, want the stderr line", b)
	}
}
