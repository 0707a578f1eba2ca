package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
)

// multilineText is what the multiline workflow's step sends to the demo's
// upper tool: lines, an indented one, pretty JSON.
const multilineText = "line one\nline two\n\tindented\n{\n  \"a\": 1\n}"

// multilineWorkspace is a workspace, set up as TestGolden's, with a
// workflow whose step returns several lines of text and whose outputs
// hold them.
func multilineWorkspace(t *testing.T) (ws, cfg, wf string) {
	t.Helper()
	ws, cfg = t.TempDir(), t.TempDir()
	t.Setenv(asMainEnv, "1")
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("NO_COLOR", "1")
	t.Setenv("MCPFLOW_JOURNAL", "")
	b, _ := json.Marshal(multilineText)
	wf = filepath.Join(ws, "multiline.yaml")
	src := "name: multiline\nservers:\n  demo: {builtin: demo}\nsteps:\n" +
		"  - id: shout\n    server: demo\n    tool: upper\n    with:\n      text: " + string(b) + "\n" +
		"outputs:\n  shout: ${{ steps.shout.text }}\n  count: ${{ 2 }}\n" +
		"  structured: ${{ steps.shout.structuredContent }}\n  content: ${{ steps.shout.content }}\n"
	if err := os.WriteFile(wf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return ws, cfg, wf
}

// TestGoldenMultiline: in the human views, a value of several lines is
// written on the lines after its name, indented under it — run's outputs,
// runs show's, journal show's arguments and result — and JSON too long
// for one line is indented; nothing of it reads as a name of the view.
func TestGoldenMultiline(t *testing.T) {
	ws, cfg, wf := multilineWorkspace(t)
	outputs := "outputs:\n" +
		"  content:\n    [\n      {\n        \"text\": \"LINE ONE\\nLINE TWO\\n\\tINDENTED\\n{\\n  \\\"A\\\": 1\\n}\",\n        \"type\": \"text\"\n      }\n    ]\n" +
		"  count: 2\n" +
		"  shout:\n    LINE ONE\n    LINE TWO\n    \tINDENTED\n    {\n      \"A\": 1\n    }\n" +
		"  structured: {\"text\":\"LINE ONE\\nLINE TWO\\n\\tINDENTED\\n{\\n  \\\"A\\\": 1\\n}\"}\n"
	var runID, invID string
	for _, s := range []struct {
		name string
		args func() []string
		has  string // exactly, spaces included
	}{
		{"run-multiline", func() []string { return []string{"run", wf} }, outputs},
		{"runs-show-multiline", func() []string { return []string{"runs", "show", runID} }, "\nO" + outputs[1:] + "\n"},
		{"journal-show-multiline", func() []string { return []string{"journal", "show", invID, "--payload"} },
			"Result:\n  LINE ONE\n  LINE TWO\n  \tINDENTED\n  {\n    \"A\": 1\n  }\n"},
	} {
		code, out, errs := inProcess(t, ws, s.args()...)
		if s.name == "run-multiline" {
			_, js, _ := inProcess(t, ws, "journal", "list", "--jq", ".[0].run_id, .[0].id")
			if ids := strings.Fields(js); len(ids) == 2 {
				runID, invID = ids[0], ids[1]
			}
		}
		if !strings.Contains(out, s.has) {
			t.Errorf("%s: output does not hold %q:\n%s", s.name, s.has, out)
		}
		got := fmt.Sprintf("$ mcpflow %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(s.args(), " "), code, out, errs)
		checkGolden(t, s.name, normalize(got, ws, cfg))
	}
}

// TestOutputJsonlKeepsNewlines: -o jsonl is a machine format: a step's
// text in its step_finished event and the run's outputs keep their
// newlines and white space exactly. (service's TestSeenReportKeepsText
// checks the events read back from the journal.)
func TestOutputJsonlKeepsNewlines(t *testing.T) {
	ws, _, wf := multilineWorkspace(t)
	want := strings.ToUpper(multilineText)
	code, out, errs := inProcess(t, ws, "run", wf, "-o", "jsonl")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	texts := 0
	for _, l := range ls[:len(ls)-1] {
		var ev struct{ Kind, Step, Text string }
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if ev.Kind == "step_finished" && ev.Step == "shout" {
			texts++
			if ev.Text != want {
				t.Errorf("step_finished text = %q, want %q", ev.Text, want)
			}
		}
	}
	if texts != 1 {
		t.Errorf("%d step_finished events of shout, want 1\n%s", texts, out)
	}
	var run struct{ Outputs map[string]any }
	if err := json.Unmarshal([]byte(ls[len(ls)-1]), &run); err != nil {
		t.Fatalf("last line: %v", err)
	}
	if run.Outputs["shout"] != want {
		t.Errorf("outputs.shout = %q, want %q", run.Outputs["shout"], want)
	}
}

// TestOutputPreview: a one-line preview compacts JSON, shows other text's
// first line (marked " …" when more follow) with every run of white space
// one space, and cuts what is longer than its width with an ellipsis; a step's progress line shows its text that way.
func TestOutputPreview(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Hello, Ada!", "Hello, Ada!"},
		{"{\n  \"a\": 1,\n  \"b\": [1, 2]\n}\n", `{"a":1,"b":[1,2]}`},
		{"line one\n\tline two  \n", "line one …"},
		{"line one  \n\n", "line one"},
		{"{not json\n  x}", "{not json …"},
		{strings.Repeat("word ", 20), strings.Repeat("word ", 11) + "word…"},
		{"[\n" + strings.Repeat("  \"item\",\n", 20) + "  \"last\"\n]", "[" + strings.Repeat(`"item",`, 8) + `"i…`},
	} {
		if got := preview(tc.in, previewWidth); got != tc.want {
			t.Errorf("preview(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	ev := engine.Event{Kind: engine.StepFinished, Step: "fetch", Item: -1, Server: "demo", Tool: "upper", State: journal.StateCompleted, Attempt: 1,
		Elapsed: time.Millisecond, Text: "{\n  \"title\": \"Release notes\",\n  \"labels\": [\"docs\", \"cli\"]\n}"}
	if got, want := finishedLine(ev, columns{}, plain, 0), `  → {"title":"Release notes","labels":["docs","cli"]}`; !strings.HasSuffix(got, want) {
		t.Errorf("finishedLine = %q, want it to end %q", got, want)
	}
	// On an 80-column screen the preview takes what is left of the line.
	ev.Text = strings.Repeat("All work and no play. ", 10)
	if got := finishedLine(ev, columns{}, plain, 80); runewidth.StringWidth(got) != 80 || !strings.HasSuffix(got, "…") {
		t.Errorf("finishedLine on 80 columns: %d columns: %q", runewidth.StringWidth(got), got)
	}
	if got := finishedLine(ev, columns{}, plain, 0); runewidth.StringWidth(got) > 61+4+previewWidth {
		t.Errorf("finishedLine: %d columns: %q", runewidth.StringWidth(got), got)
	}
}

// TestServersToolDetail: servers tools NAME TOOL shows the annotations as
// named flags, exactly what the tool declares, and each schema as a table
// of its properties, nested ones named by their path, every column
// aligned.
func TestServersToolDetail(t *testing.T) {
	detail := &api.ToolDetail{
		Tool: api.Tool{
			Name:        "create_issue",
			Description: "Create an issue.\nThe title is required.",
			Annotations: json.RawMessage(`{"title":"Create issue","readOnlyHint":false,"openWorldHint":true,"idempotentHint":false,"x-cost":3}`),
			Replay:      api.Replay{Reason: "server_not_trusted", Declared: "not_declared_idempotent_or_read_only"},
		},
		InputSchema: json.RawMessage(`{"type":"object","required":["repo","title"],"properties":{
			"repo":{"type":"string","description":"owner/name"},
			"title":{"type":"string"},
			"labels":{"type":"array","items":{"type":"string","enum":["bug","docs"]}},
			"assignee":{"type":["string","null"],"default":null,"description":"a login\nor null"},
			"milestone":{"type":"object","required":["number"],"properties":{"number":{"type":"integer","minimum":1},"due":{"type":"string","format":"date"}}},
			"links":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"}}}},
			"priority":{"enum":[1,2,3],"default":2},
			"extra":true}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"number":{"type":"integer"},"url":{"$ref":"#/$defs/URL"}}}`),
	}
	var out strings.Builder
	if err := showTool(&out, detail); err != nil {
		t.Fatal(err)
	}
	want := `Tool:         create_issue
Description:
  Create an issue.
  The title is required.
Annotations:  not read-only, not idempotent, open-world, title "Create issue", x-cost=3
Replay:       no: server_not_trusted (declared: not_declared_idempotent_or_read_only)

Arguments:
  NAME              TYPE             REQUIRED  DEFAULT  DESCRIPTION
  assignee          string|null      -         -        a login …
  extra             any              -         -        -
  labels            array of string  -         -        -
  links             array of object  -         -        -
  links[].url       string           -         -        -
  milestone         object           -         -        -
  milestone.due     string (date)    -         -        -
  milestone.number  integer          yes       -        -
  priority          enum             -         2        one of: 1, 2, 3
  repo              string           yes       -        owner/name
  title             string           yes       -        -

Output:
  NAME    TYPE     REQUIRED
  number  integer  -
  url     URL      -
`
	if out.String() != want {
		t.Errorf("showTool:\n%s\nwant:\n%s", out.String(), want)
	}
	for _, tc := range []struct{ in, want string }{
		{`null`, "none declared"},
		{`{}`, "none declared"},
		{`{"readOnlyHint":true,"destructiveHint":false}`, "read-only, not destructive"},
		{`{"destructiveHint":true,"idempotentHint":true,"openWorldHint":false}`, "destructive, idempotent, closed-world"},
		{`{"readOnlyHint":"yes"}`, `readOnlyHint="yes"`},
	} {
		if got := annotationsText(json.RawMessage(tc.in)); got != tc.want {
			t.Errorf("annotationsText(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestOutputColumnsLongNames: a run's step lines keep their columns in
// line when its step ids and server/tool names are longer than the usual
// columns: the columns are as wide as the workflow's longest, and no name
// is cut.
func TestOutputColumnsLongNames(t *testing.T) {
	ws, _, _ := multilineWorkspace(t)
	wf := filepath.Join(ws, "long.yaml")
	src := `name: long
servers:
  demo: {builtin: demo}
  a_server_with_a_long_name: {builtin: demo}
steps:
  - {id: greet, server: demo, tool: greet, with: {name: Ada}}
  - {id: shout, server: a_server_with_a_long_name, tool: upper, with: {text: hi}}
  - {id: a_long_step_name_here, server: demo, tool: contradictory_read, with: {}}
  - {id: fan, server: demo, tool: greet, for_each: '${{ ["Bo", "Cy"] }}', with: {name: '${{ item }}'}}
`
	if err := os.WriteFile(wf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := inProcess(t, ws, "run", wf)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var steps []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "step ") {
			steps = append(steps, l)
		}
	}
	if len(steps) != 5 {
		t.Fatalf("%d step lines, want 5:\n%s", len(steps), out)
	}
	for _, name := range []string{"a_long_step_name_here ", "a_server_with_a_long_name/upper ", "fan[1] "} {
		if !strings.Contains(out, name) {
			t.Errorf("%q cut:\n%s", name, out)
		}
	}
	// The state, the server/tool (after the state) and the arrow (after
	// the time) start in the same column on every line.
	for _, l := range steps {
		for _, col := range []string{"completed", "→"} {
			if got, want := strings.Index(l, col), strings.Index(steps[0], col); got != want {
				t.Errorf("%q starts at %d, want %d (as in the first line):\n%s", col, got, want, strings.Join(steps, "\n"))
			}
		}
	}
}

// TestOutputColumnsOf: the columns of a run's lines are sized from its
// workflow: its longest step id (with room for an item's index under
// for_each) and server/tool, never narrower than the usual widths.
func TestOutputColumnsOf(t *testing.T) {
	for _, tc := range []struct {
		src        string
		name, tool int
	}{
		{"steps:\n  - {id: a, server: s, tool: t}\n", nameColumn, toolColumn},
		{"steps:\n  - {id: a_long_step_name_here, server: a_server_with_a_long_name, tool: upper}\n", 21, 31},
		{"steps:\n  - {id: fan_out_items, server: s, tool: t, for_each: '${{ inputs.xs }}'}\n", 18, toolColumn},
		{"not: [valid", nameColumn, toolColumn},
		// A read's column is what the lines show: resource SERVER URI.
		{"steps:\n  - {id: a, server: demo, resource: 'file:///demo/notes.txt'}\n", nameColumn, 36},
		{"steps:\n  - {id: a, resource: {server: demo, uri: 'file:///demo/notes.txt'}}\n", nameColumn, 36},
		{"steps:\n  - {id: a, server: demo, prompt: a_prompt_with_a_long_name}\n", nameColumn, 37},
	} {
		if n, tl := columnsOf([]byte(tc.src)).widths(); n != tc.name || tl != tc.tool {
			t.Errorf("columnsOf(%q) = %d, %d; want %d, %d", tc.src, n, tl, tc.name, tc.tool)
		}
	}
}

// TestServersListErrorExact: servers list -o json gives a server's error
// whole, the lines of its stderr included; the table shows its first line.
func TestServersListErrorExact(t *testing.T) {
	ws, _, _ := multilineWorkspace(t)
	conf := "servers:\n  bad: {command: sh, args: [\"-c\", \"echo first problem >&2; echo second line >&2; exit 3\"]}\n"
	if err := os.WriteFile(filepath.Join(ws, "mcpflow.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, errs := inProcess(t, ws, "servers", "list", "--trust-workspace", "-o", "json")
	var list []struct{ Name, Error string }
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		t.Fatalf("servers list -o json: %v\n%s%s", err, out, errs)
	}
	if !strings.Contains(list[0].Error, "\nfirst problem\nsecond line") {
		t.Errorf("error = %q, want the server's stderr lines in it", list[0].Error)
	}
	_, out, _ = inProcess(t, ws, "servers", "list", "--trust-workspace")
	if first, _, _ := strings.Cut(list[0].Error, "\n"); !strings.Contains(out, "error: "+first+"\n") || strings.Contains(out, "server stderr") {
		t.Errorf("table:\n%s\nwant the error's first line only", out)
	}
}
