package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
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
			t.row(v.Name, string(v.Annotations), verdictText(v.Replay))
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
// its arguments and its output.
func showTool(w io.Writer, t *api.ToolDetail) error {
	fmt.Fprintf(w, "Tool:         %s\n", t.Name)
	if t.Description != "" {
		fmt.Fprintf(w, "Description:  %s\n", firstLine(t.Description))
	}
	fmt.Fprintf(w, "Annotations:  %s\nReplay:       %s\n\nArguments:\n", t.Annotations, verdictText(t.Replay))
	var schema struct {
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
			Default     any    `json:"default"`
			Enum        []any  `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(t.InputSchema, &schema)
	if len(schema.Properties) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		tab := newTable(w, "  NAME", "TYPE", "REQUIRED", "DEFAULT", "DESCRIPTION")
		for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
			p := schema.Properties[name]
			typ := fmt.Sprint(p.Type)
			if p.Type == nil {
				typ = "any"
			}
			if len(p.Enum) > 0 {
				b, _ := json.Marshal(p.Enum)
				typ += " " + string(b)
			}
			req := "-"
			if slices.Contains(schema.Required, name) {
				req = "yes"
			}
			def := "-"
			if p.Default != nil {
				b, _ := json.Marshal(p.Default)
				def = string(b)
			}
			tab.row("  "+name, typ, req, def, firstLine(p.Description))
		}
		if err := tab.flush(); err != nil {
			return err
		}
	}
	if string(t.OutputSchema) == "null" {
		_, err := fmt.Fprintln(w, "\nOutput: no schema declared (text content)")
		return err
	}
	_, err := fmt.Fprintf(w, "\nOutput schema: %s\n", t.OutputSchema)
	return err
}
