package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fatih/color"
	"github.com/mattn/go-runewidth"
	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"go.yaml.in/yaml/v3"
	"golang.org/x/term"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// progressSink receives engine events and renders them; close flushes and
// stops rendering. event may be called from several goroutines at once
// (for_each fan-out); events after close are dropped. close is idempotent.
type progressSink interface {
	event(engine.Event)
	close()
}

var (
	_ progressSink = (*plainPrinter)(nil)
	_ progressSink = (*liveDisplay)(nil)
	_ progressSink = nopSink{}
	_ progressSink = (*eventLines)(nil)
)

// newProgressSink returns a live display when w is a terminal (isTTY) and
// a line-per-event printer for logs otherwise, their columns as wide as
// cols.
func newProgressSink(w io.Writer, isTTY bool, noColor bool, cols columns) progressSink {
	if isTTY {
		return newLiveDisplay(w, liveOptions{color: !noColor, columns: cols})
	}
	p := newPlainPrinter(w)
	p.cols = cols
	return p
}

// progressFor is the sink a command that runs workflows reports to: with
// -o jsonl each event as a JSON line (the API's event shape) before the
// run's own line; nothing for json, --json or --jq (stdout then carries
// the document only); lines, not redrawn rows, on a terminal that says it
// cannot move the cursor (TERM=dumb). cols sizes the lines' columns for
// the run's steps (columnsOf).
func progressFor(g *globals, w io.Writer, cols columns) progressSink {
	p := g.printer(nil)
	if p.format == "jsonl" && len(p.fields) == 0 && p.jq == nil {
		return &eventLines{w: w}
	}
	if p.structured() {
		return nopSink{}
	}
	return newProgressSink(w, isTerminal(w) && os.Getenv("TERM") != "dumb", g.noColor, cols)
}

// callProgressFor is the sink of call: the running call's row on w (its
// stderr) while it runs, when w is a terminal that can move the cursor and
// the output is a table; nothing otherwise. No line stays: the result is
// call's output.
func callProgressFor(g *globals, w io.Writer) progressSink {
	if g.output != "table" || !isTerminal(w) || os.Getenv("TERM") == "dumb" {
		return nopSink{}
	}
	return newLiveDisplay(w, liveOptions{color: !g.noColor, rowsOnly: true})
}

// isTerminal reports whether w is an *os.File that is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && f != nil && term.IsTerminal(int(f.Fd()))
}

// eventLines writes each event as one JSON line, as it happens.
type eventLines struct {
	mu   sync.Mutex
	w    io.Writer
	done bool
}

func (l *eventLines) event(ev engine.Event) {
	b, err := json.Marshal(service.EventOf(ev))
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.w.Write(append(b, '\n'))
	}
}

func (l *eventLines) close() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}

type nopSink struct{}

func (nopSink) event(engine.Event) {}
func (nopSink) close()             {}

// unitKey names one invocation's worth of a step: the step, or one item of
// its for_each.
type unitKey struct {
	step string
	item int
}

func keyOf(ev engine.Event) unitKey { return unitKey{ev.Step, ev.Item} }

// unitName is how a unit is shown: the step id, or step[i] for an item.
func unitName(step string, item int) string {
	if item >= 0 {
		return fmt.Sprintf("%s[%d]", step, item)
	}
	return step
}

// columns are the widths of the name and server/tool columns of a run's
// step lines: the usual ones (nameColumn, toolColumn), or wider for the
// run's longer names, so that all the lines of a run keep their columns
// in line. The zero value is the usual widths.
type columns struct{ name, tool int }

// stateColumn is the width of the state column, the usual states'
// (outcome_unknown and retry_approved overflow it).
const stateColumn = 10

// forEachRoom is what a for_each step's lines add to its id: an item's
// index, [0] to [999].
const forEachRoom = len("[999]")

// columnsOf sizes the columns for the steps of a workflow definition (its
// YAML source): each step's id, with room for an item's index when it has
// a for_each, and its server/tool. Only the layout depends on it: a
// definition it cannot read gets the usual widths, and a name longer than
// its column (an item past 999) widens its own line only.
func columnsOf(definition []byte) columns {
	var wf struct {
		Steps []struct {
			ID       string    `yaml:"id"`
			Server   string    `yaml:"server"`
			Tool     string    `yaml:"tool"`
			Prompt   string    `yaml:"prompt"`
			Resource yaml.Node `yaml:"resource"`
			ForEach  yaml.Node `yaml:"for_each"`
		} `yaml:"steps"`
	}
	var c columns
	if yaml.Unmarshal(definition, &wf) != nil {
		return c
	}
	for _, st := range wf.Steps {
		name := runewidth.StringWidth(st.ID)
		if !st.ForEach.IsZero() {
			name += forEachRoom
		}
		c.name = max(c.name, name)
		target := api.Target(journal.MethodCall, st.Server, st.Tool)
		switch {
		case st.Prompt != "":
			target = api.Target(journal.MethodPrompt, st.Server, st.Prompt)
		case st.Resource.Kind == yaml.ScalarNode:
			target = api.Target(journal.MethodRead, st.Server, st.Resource.Value)
		case st.Resource.Kind == yaml.MappingNode:
			var r struct{ Server, URI string }
			st.Resource.Decode(&r)
			target = api.Target(journal.MethodRead, r.Server, r.URI)
		}
		c.tool = max(c.tool, runewidth.StringWidth(target))
	}
	return c
}

// runColumns sizes the step lines of a run from its definition, as
// journaled (columnsOf); the usual widths when the run cannot be read (the
// command that follows it then says why).
func runColumns(b service.API, ref string) columns {
	rep, err := b.RunDetail(ref)
	if err != nil || rep.Run == nil {
		return columns{}
	}
	return columnsOf(rep.Run.Definition)
}

// widths are the columns' widths: at least the usual ones.
func (c columns) widths() (name, tool int) {
	return max(c.name, nameColumn), max(c.tool, toolColumn)
}

// minPreview is the fewest columns a result's preview is cut to on a
// narrow screen.
const minPreview = 10

// finishedLine is a finished unit's line, without its error: the format
// scripts and tests match (`^step greet +completed +demo/greet +\S+ +→ …$`),
// its columns as wide as cols. A completed call's text follows the arrow
// as its preview: on one line, at most previewWidth columns, and on a
// screen screen columns wide (0: not a screen) no more than what is left
// of the line (but minPreview). state styles the padded state column; the
// other columns are never styled, so with an identity style the line is
// byte for byte the plain one.
func finishedLine(ev engine.Event, cols columns, state func(string) string, screen int) string {
	nameW, toolW := cols.widths()
	head := "step " + pad(unitName(ev.Step, ev.Item), nameW) + " "
	st := pad(stateLabel(ev), stateColumn)
	tail := fmt.Sprintf(" %s %8s", pad(api.Target(ev.Method, ev.Server, ev.Tool), toolW), round(ev.Elapsed))
	if ev.Attempt > 1 {
		tail += fmt.Sprintf("  attempt %d", ev.Attempt)
	}
	if ev.Text != "" {
		tail += "  → "
		width := previewWidth
		if screen > 0 {
			width = min(width, max(screen-runewidth.StringWidth(head+st+tail), minPreview))
		}
		tail += preview(ev.Text, width)
	}
	return head + state(st) + tail
}

// runLine is the line that ends a run: its status (styled by status), its
// wall time from start to end, resumes and all, and, when it waited a
// second or more (for an approval, an operator, a resume), the time a call
// was in flight and the wait.
func runLine(ev engine.Event, status func(string) string) string {
	line := fmt.Sprintf("run %s %s in %s", ev.Run, status(ev.Status.String()), round(ev.Elapsed))
	if ev.Waited >= api.MinIdle {
		line += fmt.Sprintf(" (work %s, waited %s)", round(ev.Work), round(ev.Waited))
	}
	return line
}

// isNote reports whether a StepProgress event is the engine's own message
// (a retry announcement) rather than a notifications/progress.
func isNote(ev engine.Event) bool {
	return ev.Progress == 0 && ev.Total == 0 && ev.Message != ""
}

// progressCount is "40/100", or "40" when the total is unknown, or "".
func progressCount(progress, total float64) string {
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	switch {
	case total > 0:
		return num(progress) + "/" + num(total)
	case progress > 0:
		return num(progress)
	}
	return ""
}

// plainPrinter prints one line per finished step and per run boundary, and
// at most one line a second per unit for notifications/progress: readable
// in CI logs, where nothing is redrawn. Each event is one Write.
type plainPrinter struct {
	w     io.Writer
	cols  columns
	now   func() time.Time
	every time.Duration

	mu   sync.Mutex
	last map[unitKey]time.Time // when a unit's progress was last printed
	done bool
}

func newPlainPrinter(w io.Writer) *plainPrinter {
	return &plainPrinter{w: w, now: time.Now, every: time.Second, last: map[unitKey]time.Time{}}
}

func (p *plainPrinter) event(ev engine.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	var b strings.Builder
	switch ev.Kind {
	case engine.RunStarted:
		fmt.Fprintf(&b, "run %s started: %s\n", ev.Run, ev.Workflow)
	case engine.StepProgress:
		nameW, _ := p.cols.widths()
		name := pad(unitName(ev.Step, ev.Item), nameW)
		if isNote(ev) {
			fmt.Fprintf(&b, "step %s %s\n", name, ev.Message)
			break
		}
		now, k := p.now(), keyOf(ev)
		if last, ok := p.last[k]; ok && now.Sub(last) < p.every {
			return
		}
		p.last[k] = now
		fmt.Fprintf(&b, "step %s progress %s", name, progressCount(ev.Progress, ev.Total))
		if ev.Message != "" {
			b.WriteString("  " + ev.Message)
		}
		b.WriteString("\n")
	case engine.StepFinished:
		delete(p.last, keyOf(ev))
		b.WriteString(finishedLine(ev, p.cols, plain, 0))
		if ev.Err != nil {
			b.WriteString("\n    " + ev.Err.Error())
		}
		b.WriteString("\n")
	case engine.RunFinished:
		b.WriteString(runLine(ev, plain) + "\n")
		if ev.Err != nil && ev.Status != journal.RunBlocked {
			fmt.Fprintf(&b, "    %s\n", ev.Err.Error())
		}
	}
	if b.Len() > 0 {
		io.WriteString(p.w, b.String())
	}
}

func (p *plainPrinter) close() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
}

func plain(s string) string { return s }

// palette styles states and statuses; every style is the identity without
// colour.
type palette struct {
	good, bad, warn, faint, busy func(string) string
}

func newPalette(on bool) palette {
	style := func(attrs ...color.Attribute) func(string) string {
		if !on {
			return plain
		}
		c := color.New(attrs...)
		c.EnableColor() // the caller decided: --no-color, NO_COLOR, a terminal
		return func(s string) string { return c.Sprint(s) }
	}
	return palette{
		good:  style(color.FgGreen),
		bad:   style(color.FgRed, color.Bold),
		warn:  style(color.FgYellow, color.Bold),
		faint: style(color.Faint),
		busy:  style(color.FgCyan),
	}
}

// stateLabel is the state column: the invocation's state, except that a
// call whose result was a tool error (completed, but the step failed) says
// tool_error.
func stateLabel(ev engine.Event) string {
	return api.StateLabel(ev.State, ev.Err != nil)
}

// eventState styles a finished unit's state column.
func (p palette) eventState(ev engine.Event) func(string) string {
	if stateLabel(ev) == api.ToolError {
		return p.bad
	}
	return p.state(ev.State)
}

func (p palette) state(s journal.State) func(string) string {
	switch s {
	case journal.StateCompleted:
		return p.good
	case journal.StateFailed, journal.StateAborted, journal.StateTimedOut:
		return p.bad
	case journal.StateOutcomeUnknown, journal.StateIntent, journal.StateRetryApproved:
		return p.warn
	case journal.StateSkipped:
		return p.faint
	}
	return plain
}

func (p palette) status(s journal.RunStatus) func(string) string {
	switch s {
	case journal.RunSucceeded:
		return p.good
	case journal.RunFailed:
		return p.bad
	case journal.RunBlocked, journal.RunCancelled:
		return p.warn
	}
	return plain
}

// liveOptions configures a liveDisplay; the zero value is a real terminal's.
type liveOptions struct {
	color bool
	// width is the screen width when w is not a terminal (tests); 0 means
	// 80. A terminal's own width is read at every frame.
	width int
	// refresh is the time between frames; 0 means 100ms.
	refresh time.Duration
	// now is the clock for running steps' elapsed time; nil means time.Now.
	now func() time.Time
	// rowsOnly shows the running rows and prints no lines: for call,
	// whose result is its output.
	rowsOnly bool
	// columns are the widths of the name and server/tool columns.
	columns columns
}

// liveDisplay shows one row per running unit — state, elapsed time,
// attempt, a bar fed by notifications/progress (a spinner while the total
// is unknown) and the latest message — redrawn in place, and prints each
// finished unit's lines above those rows, in the order units finish, in
// the plain printer's format. mpb (github.com/vbauerster/mpb) draws: it
// moves the cursor up over its own rows only and never changes terminal
// modes, so an interrupt at any moment leaves a usable terminal.
//
// An mpb container exists from a run's first unit to the run's end (or
// close); lines printed meanwhile go through it, so that they land above
// the rows. Frames are requested by a ticker this display owns; stop asks
// for a last one, so that nothing printed is left in mpb's buffer.
type liveDisplay struct {
	w    io.Writer
	opts liveOptions
	pal  palette

	mu     sync.Mutex
	p      *mpb.Progress // nil between runs
	frames chan any      // frame requests to p
	shut   chan any      // closed when p has shut down
	quit   chan struct{} // stops the ticker
	ticker sync.WaitGroup
	units  map[unitKey]*liveUnit
	steps  map[string]int // order in which steps were first seen: row order
	closed bool
}

// liveUnit is what one row shows. mpb calls the row's decorators and
// filler from the bar's own goroutine, so the fields are guarded by mu, and
// mu is never held while calling into mpb.
type liveUnit struct {
	bar      *mpb.Bar // nil if mpb had shut down (it cannot draw)
	step     string
	item     int
	priority int

	mu       sync.Mutex
	server   string
	tool     string
	method   journal.Method
	retrying bool // between a failed attempt and the next
	attempt  int
	started  time.Time
	progress float64
	total    float64
	message  string
}

func newLiveDisplay(w io.Writer, opts liveOptions) *liveDisplay {
	if opts.refresh <= 0 {
		opts.refresh = 100 * time.Millisecond
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	return &liveDisplay{w: w, opts: opts, pal: newPalette(opts.color), units: map[unitKey]*liveUnit{}, steps: map[string]int{}}
}

// barScale is the resolution of the bar: progress/total is mapped to
// 0..barScale, since mpb counts in integers.
const barScale = 10000

// barWidth is the bar's width, brackets included, when the screen is wide
// enough; narrower screens get a narrower bar and then no message.
const barWidth = 24

func (d *liveDisplay) event(ev engine.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	switch ev.Kind {
	case engine.RunStarted:
		d.stop()
		if !d.opts.rowsOnly {
			fmt.Fprintf(d.w, "run %s started: %s\n", ev.Run, ev.Workflow)
		}
	case engine.StepStarted:
		u := d.unit(ev)
		u.mu.Lock()
		u.server, u.tool, u.method, u.retrying, u.attempt = ev.Server, ev.Tool, ev.Method, false, ev.Attempt
		u.started, u.progress, u.total, u.message = d.opts.now(), 0, 0, ""
		u.mu.Unlock()
		if u.bar != nil {
			u.bar.SetTotal(0, false)
			u.bar.SetCurrent(0)
		}
	case engine.StepProgress:
		u := d.unit(ev)
		u.mu.Lock()
		if isNote(ev) {
			u.retrying, u.message = true, ev.Message
			u.mu.Unlock()
			return
		}
		u.retrying, u.progress, u.total = false, ev.Progress, ev.Total
		if ev.Message != "" {
			u.message = ev.Message
		}
		u.mu.Unlock()
		if ev.Total > 0 && u.bar != nil {
			u.bar.SetTotal(barScale, false)
			u.bar.SetCurrent(int64(min(max(ev.Progress/ev.Total, 0), 1) * barScale))
		}
	case engine.StepFinished:
		if d.opts.rowsOnly {
			if u, ok := d.units[keyOf(ev)]; ok {
				delete(d.units, keyOf(ev))
				u.drop()
			}
			return
		}
		var b strings.Builder
		b.WriteString(finishedLine(ev, d.opts.columns, d.pal.eventState(ev), d.screenWidth()))
		if ev.Err != nil {
			b.WriteString("\n    " + d.pal.bad(ev.Err.Error()))
		}
		b.WriteString("\n")
		d.print(b.String())
		if u, ok := d.units[keyOf(ev)]; ok {
			delete(d.units, keyOf(ev))
			u.drop()
		}
	case engine.RunFinished:
		d.stop()
		if d.opts.rowsOnly {
			return
		}
		fmt.Fprintln(d.w, runLine(ev, d.pal.status(ev.Status)))
		if ev.Err != nil && ev.Status != journal.RunBlocked {
			fmt.Fprintf(d.w, "    %s\n", ev.Err.Error())
		}
	}
}

// screenWidth is the width of the screen: the terminal's, read now, or
// opts.width; 0 when neither is known.
func (d *liveDisplay) screenWidth() int {
	if d.opts.width > 0 {
		return d.opts.width
	}
	if f, ok := d.w.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil {
			return w
		}
	}
	return 0
}

// close ends the units still shown and writes the last frame.
func (d *liveDisplay) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	d.stop()
}

// print writes s above the rows. Called with d.mu held.
func (d *liveDisplay) print(s string) {
	if d.p == nil {
		io.WriteString(d.w, s)
		return
	}
	// Buffered by mpb until the next frame. If mpb shut down (it failed
	// to draw) nothing is drawn any more: write directly.
	if _, err := io.WriteString(d.p, s); err != nil {
		io.WriteString(d.w, s)
	}
}

// drop removes the row at the next frame, which draws it a last time.
func (u *liveUnit) drop() {
	if u.bar != nil {
		u.bar.Abort(true)
	}
}

// stop prints the units still running as the intents they are (the engine
// ended without their outcome), removes every row and shuts the container
// down. When it returns everything is written and the cursor is below it.
// Called with d.mu held.
func (d *liveDisplay) stop() {
	if d.p == nil {
		return
	}
	left := make([]*liveUnit, 0, len(d.units))
	for _, u := range d.units {
		left = append(left, u)
	}
	slices.SortFunc(left, func(a, b *liveUnit) int { return a.priority - b.priority })
	now := d.opts.now()
	for _, u := range left {
		u.mu.Lock()
		ev := engine.Event{Step: u.step, Item: u.item, Server: u.server, Tool: u.tool, Method: u.method, State: journal.StateIntent, Attempt: u.attempt, Elapsed: now.Sub(u.started)}
		u.mu.Unlock()
		if !d.opts.rowsOnly {
			d.print(finishedLine(ev, d.opts.columns, d.pal.eventState(ev), d.screenWidth()) + "\n")
		}
		u.drop()
	}
	close(d.quit)
	d.ticker.Wait()
	select {
	case d.frames <- now: // a last frame writes what was printed since the previous one
	case <-d.shut:
	}
	d.p.Wait() // and the rows' removal
	d.p, d.frames, d.shut, d.quit = nil, nil, nil, nil
	clear(d.units)
	clear(d.steps)
}

// start creates the container and the ticker that asks it for frames.
// Called with d.mu held.
func (d *liveDisplay) start() {
	d.frames, d.shut, d.quit = make(chan any), make(chan any), make(chan struct{})
	// The caller decided that w is a terminal (forceTTY); its size is read
	// when it is one.
	cw := cupwriter.New(lineStart{d.w}, true)
	if f, ok := d.w.(*os.File); ok {
		cw.SetTermFd(int(f.Fd()))
	}
	opts := []mpb.ContainerOption{
		mpb.WithConsoleWriter(cw),
		mpb.WithShutdownNotifier(d.shut),
		mpb.WithManualRefresh(d.frames),
	}
	if d.opts.width > 0 {
		opts = append(opts, mpb.WithWidth(d.opts.width))
	}
	d.p = mpb.New(opts...)
	frames, quit := d.frames, d.quit
	d.ticker.Go(func() {
		t := time.NewTicker(d.opts.refresh)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				select {
				case frames <- now:
				case <-quit:
					return
				}
			case <-quit:
				return
			}
		}
	})
}

// unit returns the row of ev's unit, adding it. Called with d.mu held.
func (d *liveDisplay) unit(ev engine.Event) *liveUnit {
	k := keyOf(ev)
	if u, ok := d.units[k]; ok {
		return u
	}
	if d.p == nil {
		d.start()
	}
	ord, ok := d.steps[ev.Step]
	if !ok {
		ord = len(d.steps)
		d.steps[ev.Step] = ord
	}
	// Rows are ordered by step, then item, whatever order concurrent items
	// start in.
	u := &liveUnit{step: ev.Step, item: ev.Item, priority: ord<<20 | min(ev.Item+1, 1<<20-1),
		server: ev.Server, tool: ev.Tool, method: ev.Method, attempt: ev.Attempt, started: d.opts.now()}
	gauge := mpb.BarStyle().FillerMeta(d.pal.good).TipMeta(d.pal.good).Build()
	spin := mpb.SpinnerStyle().PositionLeft().Meta(d.pal.busy).Build()
	filler := mpb.BarFillerFunc(func(w io.Writer, st decor.Statistics) error {
		u.mu.Lock()
		total := u.total
		u.mu.Unlock()
		if total > 0 {
			return gauge.Fill(w, st)
		}
		return spin.Fill(w, st)
	})
	bar, err := d.p.Add(0, filler,
		mpb.BarPriority(u.priority),
		mpb.BarWidth(barWidth),
		mpb.BarFillerTrim(),
		mpb.PrependDecorators(rowDecorator(func(st decor.Statistics) (string, string) {
			return u.left(st.AvailableWidth, d.opts.now(), d.pal, d.opts.columns)
		})),
		mpb.AppendDecorators(rowDecorator(u.right)),
	)
	if err == nil { // else mpb shut down: no row
		u.bar = bar
	}
	d.units[k] = u
	return u
}

// minBarWidth is the narrowest bar: names are shortened to leave it room.
const minBarWidth = 12

// left is the row up to the bar: the columns of the final line (as wide
// as cols), with the elapsed time counting. On a screen too narrow for the
// whole row (width columns), the unit's name and the server/tool are
// shortened, with an ellipsis, so that the state, the time, the bar at its
// narrowest and the count after it still fit on the line.
func (u *liveUnit) left(width int, now time.Time, pal palette, cols columns) (raw, styled string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	state, style := pad("running", stateColumn), pal.busy
	if u.retrying {
		state, style = pad("retrying", stateColumn), pal.warn
	}
	elapsed := fmt.Sprintf("%8s", now.Sub(u.started).Truncate(100*time.Millisecond))
	// "step NAME STATE SERVER/TOOL ELAPSED ", then the bar and the tail.
	fixed := len("step ") + 1 + len(state) + 1 + 1 + runewidth.StringWidth(elapsed) + 1
	target := api.Target(u.method, u.server, u.tool)
	nameW, toolW := cols.fit(unitName(u.step, u.item), target, width-fixed-minBarWidth-runewidth.StringWidth(u.tail()))
	head := "step " + pad(shortUnitName(u.step, u.item, nameW), nameW) + " "
	short := runewidth.Truncate(target, toolW, "…")
	if u.method == journal.MethodCall {
		short = shortToolName(u.server, u.tool, toolW)
	}
	rest := " " + pad(short, toolW) + " " + elapsed + " "
	return head + state + rest, head + style(state) + rest
}

// tail is what follows the bar before the message: the count and the
// attempt. Called with u.mu held.
func (u *liveUnit) tail() string {
	var b strings.Builder
	if c := progressCount(u.progress, u.total); c != "" {
		b.WriteString(" " + c)
	}
	if u.attempt > 1 {
		fmt.Fprintf(&b, "  attempt %d", u.attempt)
	}
	return b.String()
}

// right is the row after the bar: the count, the attempt, and as much of
// the message as fits: the bar narrows from barWidth to 12 columns for it.
func (u *liveUnit) right(st decor.Statistics) (raw, styled string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var b strings.Builder
	b.WriteString(u.tail())
	if u.message != "" {
		msg := "  " + u.message
		room := st.AvailableWidth - runewidth.StringWidth(b.String())
		bar := min(max(room-runewidth.StringWidth(msg), minBarWidth), barWidth)
		if room-bar >= 6 {
			b.WriteString(runewidth.Truncate(msg, room-bar, "…"))
		}
	}
	return b.String(), b.String()
}

// The usual widths of the name and server/tool columns, when there is
// room, and the narrowest either is shortened to.
const (
	nameColumn = 12
	toolColumn = 22
	minColumn  = 6
)

// fit returns the widths of the name and server/tool columns of a row
// with room columns for both: padded to their widths (c.widths) when they
// fit, else unpadded, else shortened: the longer, or both (two fifths of
// room for the name), to no less than minColumn each.
func (c columns) fit(name, tool string, room int) (nameW, toolW int) {
	cn, ct := c.widths()
	nw, tw := runewidth.StringWidth(name), runewidth.StringWidth(tool)
	pn, pt := max(nw, cn), max(tw, ct)
	switch {
	case pn+pt <= room:
		return pn, pt
	case nw+tw <= room:
		pn = max(nw, min(cn, room-tw))
		return pn, min(pt, room-pn)
	}
	// server/tool holds two names: it gets three fifths.
	room = max(room, 2*minColumn)
	share := max(minColumn, room*2/5)
	switch {
	case nw <= share:
		return nw, room - nw
	case tw <= room-share:
		return room - tw, tw
	}
	return share, room - share
}

// shortUnitName is a unit's name in at most w columns: the step's id
// shortened with an ellipsis, an item's [i] kept.
func shortUnitName(step string, item, w int) string {
	name := unitName(step, item)
	if runewidth.StringWidth(name) <= w {
		return name
	}
	suffix := ""
	if item >= 0 {
		suffix = fmt.Sprintf("[%d]", item)
	}
	if w-len(suffix) < 2 {
		return runewidth.Truncate(name, w, "…")
	}
	return runewidth.Truncate(step, w-len(suffix), "…") + suffix
}

// shortToolName is server/tool in at most w columns: the server's name
// shortened first (to 4 columns), then the whole.
func shortToolName(server, tool string, w int) string {
	s := server + "/" + tool
	if runewidth.StringWidth(s) <= w {
		return s
	}
	keep := max(4, w-1-runewidth.StringWidth(tool))
	return runewidth.Truncate(runewidth.Truncate(server, keep, "…")+"/"+tool, w, "…")
}

// pad pads s with spaces to w columns.
func pad(s string, w int) string {
	return s + strings.Repeat(" ", max(0, w-runewidth.StringWidth(s)))
}

// lineStart starts every write (mpb writes a frame at a time) at the start
// of the line: a key echoed by the terminal, such as the ^C of an
// interrupt, moves the cursor right, and a frame's "up N lines, erase
// below" would then keep what is left of it of the rows' first line.
type lineStart struct{ w io.Writer }

func (l lineStart) Write(p []byte) (int, error) {
	n, err := l.w.Write(append([]byte{'\r'}, p...))
	return max(n-1, 0), err
}

// rowDecorator is an mpb decorator drawn from a unit's state. Its width is
// the unstyled text's, so colours take no columns.
func rowDecorator(render func(decor.Statistics) (raw, styled string)) decor.Decorator {
	return rowDecor{render: render}
}

type rowDecor struct {
	decor.WC // zero: no width sync between rows
	render   func(decor.Statistics) (raw, styled string)
}

func (d rowDecor) Decor(st decor.Statistics) (string, int) {
	raw, styled := d.render(st)
	return styled, runewidth.StringWidth(raw)
}
