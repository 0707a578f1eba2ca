package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/service"
)

type serversToolsOptions struct {
	ioStreams
	g              *globals
	workflow       *string
	server         string
	trustWorkspace bool
}

// toolView is the stable JSON shape of servers tools: annotations exactly
// as declared (absent fields absent; null when the tool has none) and the
// replay verdict under the current trust.
type toolView struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Annotations json.RawMessage `json:"annotations"`
	Replay      replayView      `json:"replay"`
}

type replayView struct {
	Safe   bool   `json:"safe"`
	Reason string `json:"reason"`
	// Declared is the verdict on the annotations alone, as if both trust
	// gates passed.
	Declared string `json:"declared"`
}

func newServersToolsCommand(g *globals, workflow *string, runF func(context.Context, *serversToolsOptions) error) *cobra.Command {
	o := &serversToolsOptions{g: g, workflow: workflow}
	cmd := &cobra.Command{
		Use:   "tools NAME",
		Short: "Show a server's tools, their annotations as declared, and whether a lost call would be replayed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.server = streams(cmd), args[0]
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
	views := make([]toolView, 0, len(rep.Tools))
	for _, t := range rep.Tools {
		raw := t.Tool.Annotations
		if raw == nil {
			raw = json.RawMessage("null")
		}
		views = append(views, toolView{Name: t.Tool.Name, Description: t.Tool.Description, Annotations: raw,
			Replay: replayView{Safe: t.Verdict.Verdict == replay.Replay, Reason: string(t.Verdict.Reason), Declared: string(t.Declared)}})
	}
	return o.g.printer(o.Out).print(views, func(w io.Writer) error {
		t := newTable(w, "TOOL", "ANNOTATIONS", "REPLAY")
		for _, v := range views {
			verdict := "yes: " + v.Replay.Reason
			if !v.Replay.Safe {
				verdict = "no: " + v.Replay.Reason
				if v.Replay.Declared != v.Replay.Reason {
					verdict += " (declared: " + v.Replay.Declared + ")"
				}
			}
			t.row(v.Name, string(v.Annotations), verdict)
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
