package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mattn/go-runewidth"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
)

// goldenProgress compares got with testdata/progress/name, or rewrites it
// with -update.
func goldenProgress(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "progress", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// progressClock is a clock that moves only when told; safe for mpb's goroutines.
type progressClock struct {
	mu sync.Mutex
	t  time.Time
}

func newProgressClock() *progressClock {
	return &progressClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *progressClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *progressClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func progressID(t *testing.T, s string) journal.ID {
	t.Helper()
	id, err := journal.ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

const (
	progressRunA = "01900000-0000-7000-8000-00000000000a"
	progressRunB = "01900000-0000-7000-8000-00000000000b"
)

// progressScript is a run as the engine reports it: a step, a step with
// progress, a for_each whose items start, report and finish interleaved
// (as concurrent items do), a retry, a skipped step, a failed run.
func progressScript(t *testing.T, clock *progressClock) []func() engine.Event {
	run := progressID(t, progressRunA)
	ev := func(e engine.Event) func() engine.Event {
		e.Run = run
		return func() engine.Event { return e }
	}
	tick := func(d time.Duration, e engine.Event) func() engine.Event {
		f := ev(e)
		return func() engine.Event { clock.add(d); return f() }
	}
	toolErr := &journal.Error{Code: engine.CodeToolError, Message: "step fan: tool greet returned an error: no such person"}
	return []func() engine.Event{
		ev(engine.Event{Kind: engine.RunStarted, Workflow: "demo"}),
		ev(engine.Event{Kind: engine.StepStarted, Step: "greet", Item: -1, Server: "demo", Tool: "greet", State: journal.StateIntent, Attempt: 1}),
		ev(engine.Event{Kind: engine.StepFinished, Step: "greet", Item: -1, Server: "demo", Tool: "greet", State: journal.StateCompleted, Attempt: 1, Elapsed: 1234 * time.Microsecond, Text: "Hello, Ada!"}),
		ev(engine.Event{Kind: engine.StepStarted, Step: "count", Item: -1, Server: "demo", Tool: "count_slowly", State: journal.StateIntent, Attempt: 1}),
		tick(100*time.Millisecond, engine.Event{Kind: engine.StepProgress, Step: "count", Item: -1, Progress: 10, Total: 100, Message: "counted 10 of 100"}),
		tick(500*time.Millisecond, engine.Event{Kind: engine.StepProgress, Step: "count", Item: -1, Progress: 20, Total: 100, Message: "counted 20 of 100"}),
		tick(500*time.Millisecond, engine.Event{Kind: engine.StepProgress, Step: "count", Item: -1, Progress: 40, Total: 100, Message: "counted 40 of 100"}),
		ev(engine.Event{Kind: engine.StepStarted, Step: "fan", Item: 2, Server: "demo", Tool: "greet", State: journal.StateIntent, Attempt: 1}),
		ev(engine.Event{Kind: engine.StepStarted, Step: "fan", Item: 0, Server: "demo", Tool: "greet", State: journal.StateIntent, Attempt: 1}),
		ev(engine.Event{Kind: engine.StepStarted, Step: "fan", Item: 1, Server: "demo", Tool: "greet", State: journal.StateIntent, Attempt: 1}),
		tick(10*time.Millisecond, engine.Event{Kind: engine.StepProgress, Step: "fan", Item: 0, Progress: 3}),
		ev(engine.Event{Kind: engine.StepProgress, Step: "fan", Item: 1, Attempt: 1, Message: "attempt 1: tool error; retrying in 100ms"}),
		tick(10*time.Millisecond, engine.Event{Kind: engine.StepProgress, Step: "fan", Item: 0, Progress: 4}),
		ev(engine.Event{Kind: engine.StepStarted, Step: "fan", Item: 1, Server: "demo", Tool: "greet", State: journal.StateIntent, Attempt: 2}),
		ev(engine.Event{Kind: engine.StepFinished, Step: "fan", Item: 2, Server: "demo", Tool: "greet", State: journal.StateCompleted, Attempt: 1, Elapsed: 25 * time.Millisecond, Text: "Hello, Grace!"}),
		ev(engine.Event{Kind: engine.StepFinished, Step: "fan", Item: 0, Server: "demo", Tool: "greet", State: journal.StateCompleted, Attempt: 1, Elapsed: 31 * time.Millisecond, Text: "Hello, Ada!"}),
		ev(engine.Event{Kind: engine.StepFinished, Step: "fan", Item: 1, Server: "demo", Tool: "greet", State: journal.StateFailed, Attempt: 2, Elapsed: 2 * time.Millisecond, Err: toolErr}),
		tick(600*time.Millisecond, engine.Event{Kind: engine.StepProgress, Step: "count", Item: -1, Progress: 99, Total: 100, Message: "counted 99 of 100"}),
		ev(engine.Event{Kind: engine.StepFinished, Step: "count", Item: -1, Server: "demo", Tool: "count_slowly", State: journal.StateCompleted, Attempt: 1, Elapsed: 1704 * time.Millisecond, Text: "counted to 100"}),
		ev(engine.Event{Kind: engine.StepFinished, Step: "happy", Item: -1, Server: "demo", Tool: "greet", State: journal.StateSkipped}),
		ev(engine.Event{Kind: engine.RunFinished, Workflow: "demo", Status: journal.RunFailed, Elapsed: 1750 * time.Millisecond, Err: toolErr}),
	}
}

// TestProgressPlain is the log format: one line per finished unit and per
// run boundary (unchanged), at most one progress line a second per unit,
// and every retry announcement.
func TestProgressPlain(t *testing.T) {
	var out bytes.Buffer
	clock := newProgressClock()
	p := newPlainPrinter(&out)
	p.now = clock.now
	for _, e := range progressScript(t, clock) {
		p.event(e())
	}
	// A second run that ends blocked: its error goes to stderr, not here.
	run := progressID(t, progressRunB)
	p.event(engine.Event{Kind: engine.RunStarted, Run: run, Workflow: "pay"})
	p.event(engine.Event{Kind: engine.StepFinished, Run: run, Step: "charge", Item: -1, Server: "demo", Tool: "ledger_append", State: journal.StateOutcomeUnknown, Attempt: 1, Elapsed: 3 * time.Millisecond,
		Err: &journal.Error{Code: "MCPFLOW_OUTCOME_UNKNOWN", Message: "the tool call may have completed and must not be retried automatically"}})
	p.event(engine.Event{Kind: engine.RunFinished, Run: run, Workflow: "pay", Status: journal.RunBlocked, Elapsed: 5 * time.Millisecond, Err: &journal.Error{Code: "MCPFLOW_OUTCOME_UNKNOWN", Message: "blocked"}})
	p.close()
	p.event(engine.Event{Kind: engine.RunStarted, Run: run, Workflow: "after close"})
	p.close()

	goldenProgress(t, "plain.txt", out.String())
	// The lines CLI tests and scripts match keep their shape.
	for _, re := range []string{
		`(?m)^run 01900000-0000-7000-8000-00000000000a started: demo$`,
		`(?m)^step greet +completed +demo/greet +\S+ +→ Hello, Ada!$`,
		`(?m)^step fan\[1\] +failed +demo/greet +\S+  attempt 2\n    MCPFLOW_TOOL_ERROR: step fan: .*$`,
		`(?m)^step happy        skipped `,
		`(?m)^step charge +outcome_unknown +demo/ledger_append`,
		`(?m)^run 01900000-0000-7000-8000-00000000000b blocked in 5ms\n\z`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output does not match %s", re)
		}
	}
}

// TestProgressPlainConcurrent sends items' events from their own goroutines:
// every event is one whole line, and each item's first progress is printed.
func TestProgressPlainConcurrent(t *testing.T) {
	var out lockedBuffer
	p := newPlainPrinter(&out)
	const items = 40
	var want []string
	for i := range items {
		want = append(want,
			fmt.Sprintf("step %-12s progress %d/10  item %d", fmt.Sprintf("fan[%d]", i), i%10, i),
			fmt.Sprintf("step %-12s attempt 1: tool error; retrying in 1ms", fmt.Sprintf("fan[%d]", i)),
			fmt.Sprintf("step %-12s %-10s %-22s %8s  attempt 2  → %s", fmt.Sprintf("fan[%d]", i), "completed", "demo/greet", "1ms", strings.Repeat("x", i+1)),
		)
	}
	var wg sync.WaitGroup
	for i := range items {
		wg.Go(func() {
			p.event(engine.Event{Kind: engine.StepStarted, Step: "fan", Item: i, Server: "demo", Tool: "greet", Attempt: 1})
			p.event(engine.Event{Kind: engine.StepProgress, Step: "fan", Item: i, Progress: float64(i % 10), Total: 10, Message: fmt.Sprintf("item %d", i)})
			p.event(engine.Event{Kind: engine.StepProgress, Step: "fan", Item: i, Progress: 9, Total: 10}) // within the second: dropped
			p.event(engine.Event{Kind: engine.StepProgress, Step: "fan", Item: i, Attempt: 1, Message: "attempt 1: tool error; retrying in 1ms"})
			p.event(engine.Event{Kind: engine.StepFinished, Step: "fan", Item: i, Server: "demo", Tool: "greet", State: journal.StateCompleted, Attempt: 2, Elapsed: time.Millisecond, Text: strings.Repeat("x", i+1)})
		})
	}
	wg.Wait()
	p.close()
	got := lines(out.String())
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("got lines:\n%s\nwant (in any order):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// termScreen replays what a terminal shows after raw: text overwriting at the
// cursor, newlines (which return, as a pty's ONLCR makes them), carriage
// returns, SGR colours (dropped), and the one cursor motion the live
// display may use, "up N lines, erase below". Anything else fails the
// test: the display must not leave the terminal in another state. The
// returned lines stop before the cursor's line when that is empty.
func termScreen(t testing.TB, raw string) []string {
	t.Helper()
	esc := regexp.MustCompile(`^\x1b\[([0-9;]*)([A-Za-z])`)
	var shown [][]rune
	row, col := 0, 0
	line := func() []rune {
		for len(shown) <= row {
			shown = append(shown, nil)
		}
		return shown[row]
	}
	for len(raw) > 0 {
		switch r := []rune(raw[:min(len(raw), 4)])[0]; r {
		case '\n':
			line()
			row, col = row+1, 0
			raw = raw[1:]
		case '\r':
			col = 0
			raw = raw[1:]
		case '\x1b':
			m := esc.FindStringSubmatch(raw)
			if m == nil {
				t.Fatalf("unexpected escape sequence at %q", raw[:min(len(raw), 12)])
			}
			switch m[2] {
			case "m":
			case "A":
				n, err := strconv.Atoi(m[1])
				if err != nil || n > row {
					t.Fatalf("cursor up %q from line %d", m[1], row)
				}
				row -= n
			case "J":
				l := line()
				shown[row] = l[:min(col, len(l))]
				shown = shown[:row+1]
			default:
				t.Fatalf("unexpected escape sequence %q", m[0])
			}
			raw = raw[len(m[0]):]
		default:
			l := line()
			for len(l) < col {
				l = append(l, ' ')
			}
			if col < len(l) {
				l[col] = r
			} else {
				l = append(l, r)
			}
			shown[row] = l
			col++
			raw = raw[len(string(r)):]
		}
	}
	var out []string
	for i, l := range shown {
		if i == len(shown)-1 && i == row && len(l) == 0 {
			break
		}
		out = append(out, string(l))
	}
	return out
}

// waitTermScreen polls until the screen satisfies ok.
func waitTermScreen(t *testing.T, out *lockedBuffer, what string, ok func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := termScreen(t, out.String())
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("screen never showed %s:\n%s", what, strings.Join(s, "\n"))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// screenHas reports whether a shown line matches re.
func screenHas(re string) func([]string) bool {
	r := regexp.MustCompile(re)
	return func(s []string) bool {
		return slices.ContainsFunc(s, r.MatchString)
	}
}

// TestProgressLive drives the terminal display with the scripted run into
// a buffer (a fake 120-column terminal): running rows show a bar, a spinner
// or a count, retries and attempts; each finished unit stays as its final
// line, in the order units finished; the screen ends with nothing live.
func TestProgressLive(t *testing.T) {
	var out lockedBuffer
	clock := newProgressClock()
	d := newLiveDisplay(&out, liveOptions{width: 120, refresh: 5 * time.Millisecond, now: clock.now})
	t.Cleanup(d.close)
	script := progressScript(t, clock)
	send := func(n int) {
		for range n {
			d.event(script[0]())
			script = script[1:]
		}
	}
	send(3) // run started, greet started and finished
	waitTermScreen(t, &out, "greet's final line", screenHas(`^step greet +completed +demo/greet +1\.2ms  → Hello, Ada!$`))

	send(4) // count started, three progress notifications
	waitTermScreen(t, &out, "count's bar at 40%", screenHas(`^step count        running    demo/count_slowly          1\.1s \[=+>-+\] 40/100  counted 40 of 100$`))

	send(6) // items 2, 0, 1 start; 0 counts with no total; 1 is retrying
	s := waitTermScreen(t, &out, "the items' rows", screenHas(`^step fan\[1\] +retrying .*  attempt 1: tool error; retrying in 100ms$`))
	var rows []string
	for _, l := range s {
		if f := strings.Fields(l); len(f) > 2 && (f[2] == "running" || f[2] == "retrying") {
			rows = append(rows, f[1])
		}
	}
	if want := []string{"count", "fan[0]", "fan[1]", "fan[2]"}; !slices.Equal(rows, want) {
		t.Errorf("running rows %v, want %v (by step, then item)", rows, want)
	}
	// A spinner (one of mpb's braille frames) and the count while the total
	// is unknown.
	waitTermScreen(t, &out, "fan[0]'s spinner and count", screenHas(`^step fan\[0\] +running +demo/greet +0s [\x{2800}-\x{28FF}] +4$`))

	send(1) // item 1, attempt 2
	waitTermScreen(t, &out, "fan[1]'s second attempt", screenHas(`^step fan\[1\] +running .*  attempt 2$`))

	for _, want := range [][]string{
		{`^step fan\[2\] +completed`},
		{`^step fan\[0\] +completed`},
		{`^step fan\[1\] +failed +demo/greet +2ms  attempt 2$`, `^    MCPFLOW_TOOL_ERROR: step fan: tool greet returned an error: no such person$`},
	} {
		send(1)
		for _, re := range want {
			waitTermScreen(t, &out, re, screenHas(re))
		}
	}
	send(1) // count at 99%
	waitTermScreen(t, &out, "count's bar at 99%", screenHas(`\[=+>\] 99/100  counted 99 of 100$`))
	send(len(script))
	d.close()
	d.close()
	d.event(engine.Event{Kind: engine.RunStarted, Run: progressID(t, progressRunB), Workflow: "after close"})

	goldenProgress(t, "live.txt", strings.Join(termScreen(t, out.String()), "\n")+"\n")
	if regexp.MustCompile(`\x1b\[[0-9;]*m`).MatchString(out.String()) {
		t.Error("colours without color")
	}
}

// TestProgressLiveColor: states are coloured, colours take no columns.
func TestProgressLiveColor(t *testing.T) {
	var out lockedBuffer
	clock := newProgressClock()
	d := newLiveDisplay(&out, liveOptions{color: true, width: 100, refresh: 5 * time.Millisecond, now: clock.now})
	for _, e := range progressScript(t, clock) {
		d.event(e())
	}
	d.close()
	raw := out.String()
	for _, want := range []string{
		`step greet        \x1b\[32mcompleted \x1b\[[0-9;]*m demo/greet`,
		`step fan\[1\]       \x1b\[31;1mfailed    \x1b\[[0-9;]*m demo/greet .*\n    \x1b\[31;1mMCPFLOW_TOOL_ERROR: `,
		`step happy        \x1b\[2mskipped   \x1b\[[0-9;]*m demo/greet`,
		`step count        \x1b\[36mrunning   \x1b\[[0-9;]*m demo/count_slowly`,
		`\[(\x1b\[32m=+\x1b\[0m)?\x1b\[32m>\x1b\[0m-*\] `,
		`run 01900000-0000-7000-8000-00000000000a \x1b\[31;1mfailed\x1b\[[0-9;]*m in 1.75s\n`,
	} {
		if !regexp.MustCompile(want).MatchString(raw) {
			t.Errorf("output does not match %q", want)
		}
	}
	got := termScreen(t, raw)
	if want := fmt.Sprintf("step %-12s %-10s %-22s %8s  → counted to 100", "count", "completed", "demo/count_slowly", "1.7s"); !slices.Contains(got, want) {
		t.Errorf("screen:\n%s", strings.Join(got, "\n"))
	}
}

// TestProgressLiveClose: units the engine never finished are ended by close
// as the intents they are; nothing stays live.
func TestProgressLiveClose(t *testing.T) {
	var out lockedBuffer
	clock := newProgressClock()
	d := newLiveDisplay(&out, liveOptions{width: 100, refresh: 5 * time.Millisecond, now: clock.now})
	d.event(engine.Event{Kind: engine.RunStarted, Run: progressID(t, progressRunA), Workflow: "slow"})
	d.event(engine.Event{Kind: engine.StepStarted, Step: "count", Item: -1, Server: "demo", Tool: "count_slowly", Attempt: 1})
	d.event(engine.Event{Kind: engine.StepStarted, Step: "wide", Item: 1, Server: "demo", Tool: "greet", Attempt: 3})
	d.event(engine.Event{Kind: engine.StepProgress, Step: "count", Item: -1, Progress: 5, Total: 10, Message: strings.Repeat("very long message ", 10)})
	s := waitTermScreen(t, &out, "count's bar", screenHas(`^step count .*\[=+>-+\] 5/10  very long message.*…$`))
	for _, l := range s {
		if n := len([]rune(l)); n > 100 {
			t.Errorf("line of %d columns on a 100-column screen: %q", n, l)
		}
	}
	clock.add(2 * time.Second)
	d.close()
	got := termScreen(t, out.String())
	want := []string{
		"run 01900000-0000-7000-8000-00000000000a started: slow",
		fmt.Sprintf("step %-12s %-10s %-22s %8s", "count", "intent", "demo/count_slowly", "2s"),
		fmt.Sprintf("step %-12s %-10s %-22s %8s  attempt 3", "wide[1]", "intent", "demo/greet", "2s"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("screen after close:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestProgressLiveEcho: the terminal echoes ^C where the cursor is, below
// the rows; the next frame still redraws from the rows' first column, and
// erases it.
func TestProgressLiveEcho(t *testing.T) {
	var out lockedBuffer
	clock := newProgressClock()
	// Frames come when the test asks for them, and when the display stops.
	d := newLiveDisplay(&out, liveOptions{width: 100, refresh: time.Hour, now: clock.now})
	d.event(engine.Event{Kind: engine.RunStarted, Run: progressID(t, progressRunA), Workflow: "slow"})
	d.event(engine.Event{Kind: engine.StepStarted, Step: "count", Item: -1, Server: "demo", Tool: "count_slowly", Attempt: 1})
	d.frames <- clock.now()
	waitTermScreen(t, &out, "count's row", screenHas(`^step count +running`))
	out.Write([]byte("^C"))
	clock.add(time.Second)
	d.event(engine.Event{Kind: engine.StepFinished, Step: "count", Item: -1, Server: "demo", Tool: "count_slowly", State: journal.StateAborted, Attempt: 1, Elapsed: time.Second})
	d.event(engine.Event{Kind: engine.RunFinished, Run: progressID(t, progressRunA), Status: journal.RunCancelled, Elapsed: time.Second})
	d.close()
	got := termScreen(t, out.String())
	want := []string{
		"run 01900000-0000-7000-8000-00000000000a started: slow",
		fmt.Sprintf("step %-12s %-10s %-22s %8s", "count", "aborted", "demo/count_slowly", "1s"),
		"run 01900000-0000-7000-8000-00000000000a cancelled in 1s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("screen:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestProgressSinkChoice(t *testing.T) {
	var b bytes.Buffer
	if _, ok := newProgressSink(&b, false, false, columns{}).(*plainPrinter); !ok {
		t.Error("not a terminal: want the plain printer")
	}
	s := newProgressSink(&b, true, true, columns{})
	if d, ok := s.(*liveDisplay); !ok || d.opts.color {
		t.Errorf("terminal with --no-color: got %T %+v", s, s)
	}
	s.close()
	if _, ok := progressFor(&globals{output: "json"}, &b, columns{}).(nopSink); !ok {
		t.Error("-o json: want no progress")
	}
	if isTerminal(&b) || isTerminal(os.NewFile(^uintptr(0), "bad")) {
		t.Error("a buffer or a closed file is no terminal")
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("/dev/null is no terminal")
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if !isTerminal(tty) {
		t.Error("a pty is a terminal")
	}
	t.Setenv("TERM", "xterm-256color")
	if _, ok := progressFor(&globals{output: "table"}, tty, columns{}).(*liveDisplay); !ok {
		t.Error("-o table on a terminal: want the live display")
	}
	t.Setenv("TERM", "dumb")
	if _, ok := progressFor(&globals{output: "table"}, tty, columns{}).(*plainPrinter); !ok {
		t.Error("TERM=dumb: want the plain printer")
	}
}

// ptyRun runs mcpflow on a 100×40 pseudo-terminal and returns its exit
// code and everything it wrote. If interrupt is set, mcpflow gets SIGINT (as
// from Ctrl-C) once interrupt returns true for the output so far.
func ptyRun(t *testing.T, c *cli, interrupt func(string) bool, args ...string) (int, string) {
	t.Helper()
	cmd := c.command(args...)
	cmd.Env = append(cmd.Env, "TERM=xterm") // whatever the CI's is: one that moves the cursor
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 100})
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	var out lockedBuffer
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(&out, ptmx)
		copied <- err
	}()
	if interrupt != nil {
		deadline := time.Now().Add(20 * time.Second)
		for !interrupt(out.String()) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("never ready to interrupt:\n%q", out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGINT)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("mcpflow did not exit:\n%q", out.String())
	}
	// The child's side is closed: reading ends with EIO on Linux.
	if err := <-copied; err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatal(err)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		code = ee.ExitCode()
	} else if werr != nil {
		t.Fatal(werr)
	}
	return code, out.String()
}

const ptyWorkflow = `name: tty
servers: {demo: {builtin: demo}}
steps:
  - id: count
    server: demo
    tool: count_slowly
    with: {n: 20, delay_ms: 40}
  - id: greet
    server: demo
    tool: greet
    for_each: ["Ada", "Grace", "Katherine"]
    concurrency: 3
    with: {name: "${{ item }}"}
`

// TestProgressTTY runs a workflow on a pseudo-terminal: frames show the
// bar filling, and the screen ends with each unit's final line.
func TestProgressTTY(t *testing.T) {
	c := newCLI(t)
	code, raw := ptyRun(t, c, nil, "run", c.workflow("tty.yaml", ptyWorkflow))
	s := termScreen(t, raw)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, strings.Join(s, "\n"))
	}
	if !regexp.MustCompile(`step count +running +demo/count_slowly +\S+ \[=+>-+\] 1?\d/20  counted 1?\d of 20`).MatchString(raw) {
		t.Errorf("no frame shows count's bar:\n%q", raw)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^run [0-9a-f-]{36} started: tty$`),
		regexp.MustCompile(`^step count +completed +demo/count_slowly +\S+ +→ counted to 20$`),
		regexp.MustCompile(`^step greet\[\d\] +completed +demo/greet +\S+ +→ Hello, (Ada|Grace|Katherine)!$`),
		regexp.MustCompile(`^step greet\[\d\] +completed +demo/greet +\S+ +→ Hello, (Ada|Grace|Katherine)!$`),
		regexp.MustCompile(`^step greet\[\d\] +completed +demo/greet +\S+ +→ Hello, (Ada|Grace|Katherine)!$`),
		regexp.MustCompile(`^run [0-9a-f-]{36} succeeded in \S+$`),
	}
	if len(s) != len(want) {
		t.Fatalf("screen has %d lines, want %d:\n%s", len(s), len(want), strings.Join(s, "\n"))
	}
	for i, re := range want {
		if !re.MatchString(s[i]) {
			t.Errorf("line %d = %q, want %s", i+1, s[i], re)
		}
	}
}

// TestProgressTTYInterrupt interrupts a run mid-bar (SIGINT to mcpflow, as
// Ctrl-C sends it): the screen ends with the step's and the run's final
// lines and the command that continues the run, no row left, the cursor on
// a fresh line.
func TestProgressTTYInterrupt(t *testing.T) {
	c := newCLI(t)
	code, raw := ptyRun(t, c, func(out string) bool { return strings.Contains(out, "/1000") },
		"run", abs(t, "testdata/slow.yaml"))
	s := termScreen(t, raw)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, strings.Join(s, "\n"))
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^run [0-9a-f-]{36} started: slow$`),
		regexp.MustCompile(`^step count +aborted +demo/count_slowly +\S+$`),
		regexp.MustCompile(`^    MCPFLOW_ABORTED: step count: interrupted`),
		regexp.MustCompile(`^run [0-9a-f-]{36} cancelled in \S+$`),
		regexp.MustCompile(`^    MCPFLOW_ABORTED: `),
		regexp.MustCompile(`^mcpflow: run [0-9a-f-]{18} was interrupted; continue it with: mcpflow resume [0-9a-f-]{18}$`),
	}
	if len(s) != len(want) {
		t.Fatalf("screen after interrupt has %d lines, want %d:\n%s", len(s), len(want), strings.Join(s, "\n"))
	}
	for i, re := range want {
		if !re.MatchString(s[i]) {
			t.Errorf("line %d = %q, want %s", i+1, s[i], re)
		}
	}
	if !strings.HasSuffix(raw, "\n") {
		t.Errorf("output does not end with a newline: %q", raw[max(0, len(raw)-40):])
	}
}

// TestProgressLiveNarrow: on an 80-column screen, rows of units with long
// names shorten the names (an item's [i] kept) so that the state, the time
// and the whole bar fit on the line; short names stay as they are; the
// final lines keep the full names.
func TestProgressLiveNarrow(t *testing.T) {
	var out lockedBuffer
	clock := newProgressClock()
	d := newLiveDisplay(&out, liveOptions{width: 80, refresh: 5 * time.Millisecond, now: clock.now})
	t.Cleanup(d.close)
	longStep, longServer, longTool := "provision_the_primary_database", "payments-database-admin", "create_database_with_replicas"
	d.event(engine.Event{Kind: engine.RunStarted, Run: progressID(t, progressRunA), Workflow: "narrow"})
	d.event(engine.Event{Kind: engine.StepStarted, Step: "count", Item: -1, Server: "demo", Tool: "count_slowly", Attempt: 1})
	d.event(engine.Event{Kind: engine.StepStarted, Step: longStep, Item: 12, Server: longServer, Tool: longTool, Attempt: 2})
	d.event(engine.Event{Kind: engine.StepStarted, Step: longStep, Item: -1, Server: "demo", Tool: "greet", Attempt: 1})
	d.event(engine.Event{Kind: engine.StepProgress, Step: "count", Item: -1, Progress: 40, Total: 100, Message: "counted 40 of 100"})
	d.event(engine.Event{Kind: engine.StepProgress, Step: longStep, Item: 12, Progress: 400, Total: 1000, Message: strings.Repeat("copying ", 10)})
	d.event(engine.Event{Kind: engine.StepProgress, Step: longStep, Item: -1, Progress: 3})
	rows := regexp.MustCompile(`^step .* running +`)
	want := []*regexp.Regexp{
		regexp.MustCompile(`^step count        running    demo/count_slowly            0s \[=+>-+\] 40/100$`),
		regexp.MustCompile(`^step pro…\[12\] running    pay…/create_…       0s \[=+>-+\] 400/1000  attempt 2$`),
		regexp.MustCompile(`^step provision_the_primary_databa… running    demo/greet       0s [\x{2800}-\x{28FF}] +3$`),
	}
	s := waitTermScreen(t, &out, "three rows with their bars", func(s []string) bool {
		n := 0
		for _, l := range s {
			for _, re := range want {
				if re.MatchString(l) {
					n++
				}
			}
		}
		return n == len(want)
	})
	for _, l := range s {
		if rows.MatchString(l) && runewidth.StringWidth(l) > 80 {
			t.Errorf("row of %d columns on an 80-column screen: %q", runewidth.StringWidth(l), l)
		}
	}
	d.event(engine.Event{Kind: engine.StepFinished, Step: longStep, Item: 12, Server: longServer, Tool: longTool, State: journal.StateCompleted, Attempt: 2, Elapsed: time.Second})
	waitTermScreen(t, &out, "the full final line", screenHas(`^step provision_the_primary_database\[12\] completed  payments-database-admin/create_database_with_replicas +1s  attempt 2$`))
	d.close()
}

// TestFitColumns: the name and tool columns keep their widths when there is
// room, lose their padding, then shorten, the longer first.
func TestFitColumns(t *testing.T) {
	for _, tc := range []struct {
		name, tool   string
		room         int
		nameW, toolW int
	}{
		{"greet", "demo/greet", 40, 12, 22},
		{"greet", "demo/greet", 34, 12, 22},
		{"greet", "demo/greet", 20, 10, 10},
		{"greet", "demo/greet", 15, 5, 10},
		{"a_long_step_name", "demo/greet", 30, 16, 14},
		{"a_long_step_name", "srv/a_really_long_tool_name", 30, 12, 18},
		{"short", "srv/a_really_long_tool_name", 30, 5, 25},
		{"a_long_step_name", "demo/x", 12, 6, 6},
		{"a_long_step_name", "demo/x", 2, 6, 6},
	} {
		if n, w := (columns{}).fit(tc.name, tc.tool, tc.room); n != tc.nameW || w != tc.toolW {
			t.Errorf("fit(%q, %q, %d) = %d, %d; want %d, %d", tc.name, tc.tool, tc.room, n, w, tc.nameW, tc.toolW)
		}
	}
	if got := shortToolName("payments-database-admin", "create_database_with_replicas", 30); got != "pay…/create_database_with_rep…" {
		t.Errorf("shortToolName = %q", got)
	}
	if got := shortUnitName("provision_the_primary_database", 12, 14); got != "provision…[12]" {
		t.Errorf("shortUnitName = %q", got)
	}
}

// TestProgressCallTTY: call on a terminal shows the running call's row,
// with its bar, on stderr while it runs; when it ends, the screen holds the
// result and nothing else.
func TestProgressCallTTY(t *testing.T) {
	c := newCLI(t)
	wf := c.workflow("tty.yaml", ptyWorkflow)
	code, raw := ptyRun(t, c, nil, "call", "demo", "count_slowly", "--arg", "n=20", "--arg", "delay_ms=40", "--workflow", wf)
	s := termScreen(t, raw)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, strings.Join(s, "\n"))
	}
	if !regexp.MustCompile(`step call +running +demo/count_slowly +\S+ \[=+>-+\] 1?\d/20  counted 1?\d of 20`).MatchString(raw) {
		t.Errorf("no frame shows the call's bar:\n%q", raw)
	}
	if want := []string{"counted to 20"}; !slices.Equal(s, want) {
		t.Errorf("screen after the call:\n%s\nwant:\n%s", strings.Join(s, "\n"), strings.Join(want, "\n"))
	}
}

// TestCallNoProgressOffTerminal: off a terminal, and with -o json, call
// writes its result and nothing about progress.
func TestCallNoProgressOffTerminal(t *testing.T) {
	c := newCLI(t)
	wf := c.workflow("tty.yaml", ptyWorkflow)
	r := c.run("call", "demo", "count_slowly", "--arg", "n=3", "--arg", "delay_ms=1", "--workflow", wf)
	if r.code != 0 || r.stdout != "counted to 3\n" || r.stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, the result, nothing", r.code, r.stdout, r.stderr)
	}
	if _, ok := callProgressFor(&globals{output: "json"}, os.Stderr).(nopSink); !ok {
		t.Error("-o json: want no progress")
	}
}
