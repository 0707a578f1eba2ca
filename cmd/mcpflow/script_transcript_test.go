package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// transcriptEnv names the file where every mcpflow command of a script
// appends what it did: its arguments, exit code, stdout and stderr, one
// JSON line each (TestScriptsThroughServer compares two of them).
const transcriptEnv = "MCPFLOW_TEST_TRANSCRIPT"

// record is one command of a script as its transcript keeps it.
type record struct {
	Args   []string `json:"args"`
	Tty    string   `json:"tty,omitempty"` // on a terminal (ptyexec): the answer typed
	Code   int      `json:"code"`
	Stdout string   `json:"stdout"`
	Stderr string   `json:"stderr"`
}

// runRecorded is run on the process's own streams, and, when transcriptEnv
// names a file, appends the command's record to it once it is done. The
// streams reach the script unchanged: what is recorded is a copy of each
// write as it went through. A command on a terminal is not recorded here
// (wrapping the terminal would change what the command does: it asks and
// draws only on a terminal); ptyexec, which put it there, records it. Nor
// is the demo server, which a run starts as "<executable> demo-server".
func runRecorded(args []string) int {
	path := os.Getenv(transcriptEnv)
	if path == "" || (len(args) > 0 && args[0] == "demo-server") || isTerminal(os.Stdout) || isTerminal(os.Stderr) {
		return run(args, os.Stdin, os.Stdout, os.Stderr)
	}
	var out, errb lockedBuffer
	code := run(args, os.Stdin, teeWriter{os.Stdout, &out}, teeWriter{os.Stderr, &errb})
	if err := appendRecord(path, record{Args: args, Code: code, Stdout: out.String(), Stderr: errb.String()}); err != nil {
		fmt.Fprintf(os.Stderr, "mcpflow test: transcript: %v\n", err)
	}
	return code
}

// teeWriter writes to w, and copies to copy what w took.
type teeWriter struct {
	w    io.Writer
	copy io.Writer
}

func (t teeWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.copy.Write(p[:n])
	return n, err
}

// appendRecord appends r to the transcript at path in one write: commands
// of a script that end at once (a pipeline) each add a whole line.
func appendRecord(path string, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readTranscript reads the records at path, in the order the commands
// ended; a missing file is an empty transcript.
func readTranscript(path string) ([]record, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var recs []record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}

// A normaliser rewrites what changes from one execution of a script to the
// next, and so between the two modes: the work directory, ids, times and
// durations. An id becomes <idN>, numbered in the order ids first appear,
// so that the same id keeps its name and two ids stay two; a short form
// (18 or 13 characters, as mcpflow prints and scripts cut them) becomes
// <idN:LEN>, numbered as an id of its own: a 13-character form is only a
// millisecond, which a run and its first invocation may share.
type normaliser struct {
	work string
	ids  map[string]int
}

var (
	idPattern = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}(?:-[0-9a-f]{4}(?:-[0-9a-f]{4}-[0-9a-f]{12})?)?\b`)
	// shortPattern is 8 hex digits alone, an id's first 8 characters when
	// an id seen begins with them.
	shortPattern = regexp.MustCompile(`\b[0-9a-f]{8}\b`)
	timePatterns = []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d|\b)(?: [A-Z]{3,4}\b)?`), "<time>"},
		{regexp.MustCompile(`\b\d\d:\d\d:\d\d(?:\.\d+)?\b`), "<clock>"},
		{regexp.MustCompile(`\b(?:\d+(?:\.\d+)?(?:ns|µs|us|ms|s|m|h|d) ago|just now)\b`), "<ago>"},
		{regexp.MustCompile(`\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?(?:ns|µs|us|ms|s|m|h)\b`), "<dur>"},
		{regexp.MustCompile(`("elapsed_ms":\s*)\d+`), "${1}<n>"},
	}
	// hmacPattern is a keyed hash of arguments: each script has a journal
	// key of its own.
	hmacPattern = regexp.MustCompile(`hmac-sha256:[0-9a-f]{64}`)
	// wideSpace is the padding of a table's columns, which follows the
	// width of the values replaced above (not a line's indentation).
	wideSpace = regexp.MustCompile(`(\S)  +`)
)

// text normalises s.
func (n *normaliser) text(s string) string {
	if n.work != "" {
		s = strings.ReplaceAll(s, n.work, "$WORK")
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = idPattern.ReplaceAllStringFunc(s, n.id)
	s = shortPattern.ReplaceAllStringFunc(s, func(h string) string {
		for id := range n.ids {
			if strings.HasPrefix(id, h) {
				return "<id:8>"
			}
		}
		return h
	})
	for _, p := range timePatterns {
		s = p.re.ReplaceAllString(s, p.with)
	}
	s = hmacPattern.ReplaceAllString(s, "hmac-sha256:<hmac>")
	return wideSpace.ReplaceAllString(s, "$1  ")
}

// id names an id by its number, and its length when it is a short form.
func (n *normaliser) id(s string) string {
	if n.ids == nil {
		n.ids = make(map[string]int)
	}
	i, ok := n.ids[s]
	if !ok {
		i = len(n.ids) + 1
		n.ids[s] = i
	}
	if len(s) == 36 {
		return fmt.Sprintf("<id%d>", i)
	}
	return fmt.Sprintf("<id%d:%d>", i, len(s))
}

// command is a record's command line, normalised, marked when it ran on a
// terminal: what a known difference is keyed by.
func (n *normaliser) command(r record) string {
	c := n.text(strings.Join(quoteArgs(r.Args), " "))
	if r.Tty != "" {
		c += fmt.Sprintf(" (on a terminal, answering %q)", r.Tty)
	}
	return c
}

// show is a record normalised, as the comparison prints it.
func (n *normaliser) show(r record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ mcpflow %s\n", n.command(r))
	fmt.Fprintf(&b, "exit %d\n", r.Code)
	for _, s := range []struct{ name, text string }{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
		if s.text == "" {
			continue
		}
		fmt.Fprintf(&b, "[%s]\n", s.name)
		t := n.text(s.text)
		b.WriteString(t)
		if !strings.HasSuffix(t, "\n") {
			b.WriteString("\n(no final newline)\n")
		}
	}
	return b.String()
}

// quoteArgs quotes the arguments a shell would need quoted.
func quoteArgs(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"$|&;()<>*?[]{}\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return q
}
