package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// timeFormat is how tables and details show times (--time-format): one
// format, with its zone, everywhere.
type timeFormat uint8

const (
	// timeRelative: "5m ago" for the last two days in lists, local time
	// with its zone otherwise.
	timeRelative timeFormat = iota
	// timeISO: RFC 3339 in local time, with its offset.
	timeISO
)

func parseTimeFormat(s string) (timeFormat, error) {
	switch s {
	case "relative":
		return timeRelative, nil
	case "iso":
		return timeISO, nil
	}
	return 0, usageError("--time-format %q: want relative or iso", s)
}

// ago is a time in a list: how long ago, or the date and time with zone.
func (f timeFormat) ago(now, t time.Time) string {
	if f == timeISO {
		return t.Local().Format(time.RFC3339)
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02 15:04 MST")
}

// at is a time in a detail view, to the millisecond, with its zone.
func (f timeFormat) at(t time.Time) string {
	if f == timeISO {
		return t.Local().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return t.Local().Format("2006-01-02 15:04:05.000 MST")
}

// printOutputs prints a succeeded run's outputs (printValues).
func printOutputs(w io.Writer, outputs map[string]any) { printValues(w, "outputs:", outputs) }

// printValues prints named values under a heading, sorted, as "name:
// value" lines (fields): strings as they are, other values as JSON
// (valueText); a value of several lines on the lines after its name.
func printValues(w io.Writer, heading string, values map[string]any) {
	if len(values) == 0 {
		return
	}
	fmt.Fprintln(w, heading)
	f := fields{w: w, indent: "  "}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		f.add(k, valueText(values[k]))
	}
}

// stateText is an invocation's state as tables show it: tool_error for a
// call that completed with a tool error.
func stateText(inv *journal.Invocation) string { return api.InvocationState(inv) }

// errorText is the ERROR column: a tool error's text on one line (its
// preview), or the error's code.
func errorText(inv *journal.Invocation) string {
	if inv.ToolError {
		text := "tool error"
		if inv.Result != nil {
			for _, t := range api.Texts(inv.Result.Content) {
				if t != "" {
					text = t
					break
				}
			}
		}
		return preview(text, previewWidth)
	}
	if inv.Error != nil {
		return inv.Error.Code
	}
	return ""
}

// noteCut tells, on w under a table, that a list was cut at limit: how
// many it shows of how many match, and how to see the rest. count counts
// what matches (only asked when the list may be cut); noun is plural
// ("invocations"); last is the id of the last one shown; fromCursor says
// the count starts at --cursor.
func noteCut(w io.Writer, shown, limit int, count func() (service.Count, error), noun, last string, fromCursor bool) error {
	if limit == 0 || shown < limit {
		return nil
	}
	c, err := count()
	if err != nil || (c.N <= shown && !c.More) {
		return err
	}
	total := thousands(c.N)
	if c.More {
		total = "more than " + total
	}
	from := ""
	if fromCursor {
		from = " from the cursor"
	}
	_, err = fmt.Fprintf(w, "showing %s of %s %s%s — next page: --cursor %s; all: --limit 0\n", thousands(shown), total, noun, from, last)
	return err
}

// sinceFlag reads a --since flag ("" is none).
func sinceFlag(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := parseSince(v, time.Now())
	if err != nil {
		return time.Time{}, usageError("--since: %v", err)
	}
	return t, nil
}

// thousands writes n with comma separators: 2,500.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// toolText is the TOOL column of an invocation beside its SERVER: the
// tool's name, or what a read addresses ("resource URI", "prompt NAME").
func toolText(inv *journal.Invocation) string { return api.TargetName(inv.Method, inv.Tool) }
