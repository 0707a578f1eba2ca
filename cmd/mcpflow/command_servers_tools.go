package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/internal/didyoumean"
	"github.com/mcpflow/mcpflow/service"
)

type serversToolsOptions struct {
	ioStreams
	g              *globals
	workflow       *string
	server, tool   string
	trustWorkspace bool
}

func newServersToolsCommand(g *globals, workflow *string, runF func(context.Context, *serversToolsOptions) error) *cobra.Command {
	o := &serversToolsOptions{g: g, workflow: workflow}
	cmd := &cobra.Command{
		Use:   "tools NAME [TOOL]",
		Short: "Show a server's tools, their annotations as declared, and whether a lost call would be replayed",
		Long: `Show a server's tools: annotations exactly as declared and the replay verdict a
lost call would get under the current trust. With TOOL, show that tool in full:
its description, its arguments (type, required, default, allowed values) and
its output schema.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.server = streams(cmd), args[0]
			if len(args) == 2 {
				o.tool = args[1]
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runServersTools(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "judge replay as if the workspace were trusted")
	return cmd
}

func runServersTools(ctx context.Context, o *serversToolsOptions) error {
	svc, done, err := o.g.service(noJournal)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.Tools(ctx, service.ToolsRequest{Server: o.server, Workflow: *o.workflow, TrustWorkspace: o.trustWorkspace})
	if err != nil {
		return err
	}
	views := make([]api.Tool, 0, len(rep.Tools))
	var detail *api.ToolDetail
	for _, t := range rep.Tools {
		views = append(views, api.ToolOf(t.Tool.Name, t.Tool.Description, t.Tool.Annotations, t.Verdict, t.Declared))
		if t.Tool.Name == o.tool {
			d := api.ToolDetailOf(views[len(views)-1], t.Tool.InputSchema, t.Tool.OutputSchema)
			detail = &d
		}
	}
	if o.tool != "" {
		if detail == nil {
			names := make([]string, len(views))
			for i, v := range views {
				names[i] = v.Name
			}
			msg := fmt.Sprintf("server %q has no tool %q", o.server, o.tool)
			if s := didyoumean.Closest(o.tool, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			return usageError("%s; its tools: %s", msg, strings.Join(names, ", "))
		}
		return o.g.printer(o.Out).print(detail, func(w io.Writer) error { return showTool(w, detail) })
	}
	return o.g.printer(o.Out).print(views, func(w io.Writer) error {
		t := newTable(w, "TOOL", "ANNOTATIONS", "REPLAY")
		for _, v := range views {
			t.row(v.Name, annotationsText(v.Annotations), verdictText(v.Replay))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if !rep.ServerTrusted || !rep.WorkspaceTrusted {
			fmt.Fprintf(w, "\nReplay needs trust: true on server %q and a trusted workspace (mcpflow trust add, or --trust-workspace).\n", rep.Server.Name)
		}
		return nil
	})
}

// verdictText is the REPLAY column: yes or no, the reason, and what the
// tool declares when trust is what stands in the way.
func verdictText(r api.Replay) string {
	if r.Safe {
		return "yes: " + r.Reason
	}
	v := "no: " + r.Reason
	if r.Declared != r.Reason {
		v += " (declared: " + r.Declared + ")"
	}
	return v
}

// showTool prints one tool: what it is, how a lost call would be treated,
// its arguments and its output, each schema as a table of its properties.
func showTool(w io.Writer, t *api.ToolDetail) error {
	f := fields{w: w, width: len("Annotations:") + 1}
	f.add("Tool", t.Name)
	if t.Description != "" {
		f.add("Description", t.Description)
	}
	f.add("Annotations", annotationsText(t.Annotations))
	f.add("Replay", verdictText(t.Replay))
	fmt.Fprintln(w, "\nArguments:")
	if err := schemaTable(w, t.InputSchema, "none"); err != nil {
		return err
	}
	if api.IsNull(t.OutputSchema) {
		_, err := fmt.Fprintln(w, "\nOutput: no schema declared (text content)")
		return err
	}
	fmt.Fprintln(w, "\nOutput:")
	return schemaTable(w, t.OutputSchema, "no properties declared")
}

// hintWords are the MCP tool annotation hints as people read them: the
// words for true and for false.
var hintWords = []struct{ key, yes, no string }{
	{"readOnlyHint", "read-only", "not read-only"},
	{"destructiveHint", "destructive", "not destructive"},
	{"idempotentHint", "idempotent", "not idempotent"},
	{"openWorldHint", "open-world", "closed-world"},
}

// annotationsText is a tool's annotations as named flags, exactly what it
// declares ("read-only, not idempotent": a hint it does not declare is
// left out), in the order of hintWords, then its title and any other
// member as name=JSON; "none declared" for no annotations. -o json shows
// them as they came.
func annotationsText(raw json.RawMessage) string {
	if api.IsNull(raw) {
		return "none declared"
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return string(raw)
	}
	var out []string
	for _, h := range hintWords {
		v, ok := m[h.key]
		if !ok {
			continue
		}
		delete(m, h.key)
		switch string(v) {
		case "true":
			out = append(out, h.yes)
		case "false":
			out = append(out, h.no)
		default:
			out = append(out, h.key+"="+jsonText(v))
		}
	}
	var title string
	if json.Unmarshal(m["title"], &title) == nil {
		delete(m, "title")
		out = append(out, "title "+strconv.Quote(title))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+jsonText(m[k]))
	}
	if len(out) == 0 {
		return "none declared"
	}
	return strings.Join(out, ", ")
}

// schema is what the tables show of a JSON Schema.
type schema struct {
	Type        json.RawMessage    `json:"type"`
	Format      string             `json:"format"`
	Description string             `json:"description"`
	Default     json.RawMessage    `json:"default"`
	Enum        []json.RawMessage  `json:"enum"`
	Ref         string             `json:"$ref"`
	AnyOf       []schema           `json:"anyOf"`
	OneOf       []schema           `json:"oneOf"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Items       json.RawMessage    `json:"items"` // a schema, or a list of them (older drafts)
}

// UnmarshalJSON reads a schema; a boolean schema (true: anything, false:
// nothing) says nothing the tables show.
func (s *schema) UnmarshalJSON(b []byte) error {
	if t := string(bytes.TrimSpace(b)); t == "true" || t == "false" {
		*s = schema{}
		return nil
	}
	type plain schema
	return json.Unmarshal(b, (*plain)(s))
}

// schemaTable writes the properties of an object schema as a table, one
// row a property, nested objects' properties (and those of arrays'
// object items) after theirs, named by their path: address.city,
// tags[].name. DEFAULT and DESCRIPTION are left out when no property has
// one. A schema without properties is shown by its type and none.
func schemaTable(w io.Writer, raw json.RawMessage, none string) error {
	var root schema
	if err := json.Unmarshal(raw, &root); err != nil {
		_, err := fmt.Fprintf(w, "  %s\n", raw)
		return err
	}
	if len(root.Properties) == 0 {
		if api.IsNull(root.Type) || root.typeText() == "object" {
			_, err := fmt.Fprintf(w, "  %s\n", none)
			return err
		}
		_, err := fmt.Fprintf(w, "  %s (%s)\n", root.typeText(), none)
		return err
	}
	rows := append([][]string{{"  NAME", "TYPE", "REQUIRED", "DEFAULT", "DESCRIPTION"}}, root.rows("")...)
	for col := len(rows[0]) - 1; col >= 3; col-- {
		if !slices.ContainsFunc(rows[1:], func(r []string) bool { return r[col] != "-" }) {
			for i := range rows {
				rows[i] = slices.Delete(rows[i], col, col+1)
			}
		}
	}
	tab := newTable(w, rows[0]...)
	for _, r := range rows[1:] {
		tab.row(r...)
	}
	return tab.flush()
}

// rows are the table rows of s's properties, in name order, each followed
// by its own properties' rows: name, type, required, default and
// description ("-" when there is none). The description is its first line;
// the values an enum allows follow it.
func (s *schema) rows(prefix string) [][]string {
	var out [][]string
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		p := s.Properties[name]
		if p == nil {
			p = &schema{}
		}
		req, def := "-", "-"
		if slices.Contains(s.Required, name) {
			req = "yes"
		}
		if !api.IsNull(p.Default) {
			def = jsonText(p.Default)
		}
		var desc []string
		if p.Description != "" {
			d := firstLine(p.Description)
			if d != p.Description {
				d += " …"
			}
			desc = append(desc, d)
		}
		if len(p.Enum) > 0 {
			vals := make([]string, len(p.Enum))
			for i, v := range p.Enum {
				vals[i] = jsonText(v)
			}
			desc = append(desc, "one of: "+strings.Join(vals, ", "))
		}
		out = append(out, []string{"  " + prefix + name, p.typeText(), req, def, cmp.Or(strings.Join(desc, "; "), "-")})
		out = append(out, p.rows(prefix+name+".")...)
		if items := p.items(); items != nil {
			out = append(out, items.rows(prefix+name+"[].")...)
		}
	}
	return out
}

// items is an array schema's item schema, or nil.
func (s *schema) items() *schema {
	var items schema
	if json.Unmarshal(s.Items, &items) != nil {
		return nil
	}
	return &items
}

// typeText is a schema's type as the TYPE column shows it: string,
// string|null, array of integer, string (date-time), the name a $ref
// points to, the alternatives of anyOf or oneOf; enum for an enum of no
// declared type, any when it says nothing of its type.
func (s *schema) typeText() string {
	var types []string
	var one string
	switch {
	case json.Unmarshal(s.Type, &one) == nil:
		types = []string{one}
	case json.Unmarshal(s.Type, &types) == nil:
	}
	text := strings.Join(types, "|")
	switch {
	case text != "":
	case s.Ref != "":
		text = s.Ref[strings.LastIndex(s.Ref, "/")+1:]
	case len(s.AnyOf)+len(s.OneOf) > 0:
		var alts []string
		for _, a := range append(slices.Clone(s.AnyOf), s.OneOf...) {
			alts = append(alts, a.typeText())
		}
		text = strings.Join(alts, "|")
	case len(s.Properties) > 0:
		text = "object"
	case len(s.Enum) > 0:
		text = "enum"
	default:
		text = "any"
	}
	if items := s.items(); items != nil && slices.Contains(types, "array") {
		text += " of " + items.typeText()
	}
	if s.Format != "" {
		text += " (" + s.Format + ")"
	}
	return text
}
