package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/servers"
	"github.com/mcpflow/mcpflow/trust"
)

func newServersCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "servers",
		Short: "List configured MCP servers and their tools",
		Long: `List the MCP servers configured in the workspace's mcpflow.yaml (and its
imports), in --servers FILE, and — with --workflow FILE — in a workflow.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("missing subcommand: try 'mcpflow servers list' or 'mcpflow servers tools NAME'")
		},
	}
	var workflow string
	cmd.PersistentFlags().StringVar(&workflow, "workflow", "", "also the servers a workflow file declares")
	cmd.AddCommand(newServersListCommand(g, &workflow), newServersToolsCommand(g, &workflow))
	return cmd
}

// serverSet is the configured servers, with a workflow's own when asked.
func (g *globals) serverSet(workflow string) (servers.Set, error) {
	ext, err := g.external()
	if err != nil {
		return nil, err
	}
	if workflow == "" {
		return ext, nil
	}
	wf, err := loadWorkflow(workflow, ext)
	if err != nil {
		return nil, err
	}
	return wf.Servers, nil
}

type serverView struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	Target    string `json:"target"`
	Trust     bool   `json:"trust"`
	Origin    string `json:"origin,omitempty"`
	Connects  bool   `json:"connects"`
	Tools     int    `json:"tools"`
	Error     string `json:"error,omitempty"`
}

func newServersListCommand(g *globals, workflow *string) *cobra.Command {
	var noConnect bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show each server: transport, trust, and whether it connects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := g.serverSet(*workflow)
			if err != nil {
				return err
			}
			views := make([]serverView, 0, len(set))
			pool := servers.NewPool(set, &servers.Options{Workspace: g.workspace})
			defer pool.Close()
			for _, name := range set.Names() {
				srv := set[name]
				v := serverView{Name: name, Transport: srv.Transport(), Target: target(srv), Trust: srv.Trust, Origin: srv.Origin}
				if !noConnect {
					ctx, cancel := context.WithTimeout(cmd.Context(), 20*time.Second)
					sess, err := pool.Session(ctx, name)
					if err == nil {
						var tools map[string]servers.Tool
						tools, err = sess.Tools(ctx)
						v.Tools = len(tools)
					}
					cancel()
					v.Connects = err == nil
					if err != nil {
						v.Error = firstLine(err.Error())
					}
				}
				views = append(views, v)
			}
			out := cmd.OutOrStdout()
			switch g.output {
			case "json":
				return writeJSON(out, views)
			case "jsonl":
				return writeJSONL(out, views)
			}
			if len(views) == 0 {
				fmt.Fprintf(out, "no servers configured: add them to %s/mcpflow.yaml, pass --servers FILE, or --workflow FILE\n", g.workspace)
				return nil
			}
			t := newTable(out, "NAME", "TRANSPORT", "TARGET", "TRUST", "STATUS")
			for _, v := range views {
				status := "not checked"
				if !noConnect {
					status = fmt.Sprintf("ok, %d tools", v.Tools)
					if !v.Connects {
						status = "error: " + v.Error
					}
				}
				t.row(v.Name, v.Transport, v.Target, trustWord(v.Trust), status)
			}
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&noConnect, "no-connect", false, "do not start or connect to the servers")
	return cmd
}

func target(s *servers.Server) string {
	switch {
	case s.Builtin != "":
		return "builtin " + s.Builtin
	case s.URL != "":
		return s.URL
	}
	return strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
}

func trustWord(b bool) string {
	if b {
		return "trusted"
	}
	return "-"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
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

func newServersToolsCommand(g *globals, workflow *string) *cobra.Command {
	var trustWorkspace bool
	cmd := &cobra.Command{
		Use:   "tools NAME",
		Short: "Show a server's tools, their annotations as declared, and whether a lost call would be replayed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := g.serverSet(*workflow)
			if err != nil {
				return err
			}
			srv, err := set.Lookup(args[0])
			if err != nil {
				if *workflow == "" {
					return usageError("%v; servers a workflow declares need --workflow FILE", err)
				}
				return usageError("%v", err)
			}
			sess, err := servers.Connect(cmd.Context(), srv, &servers.Options{Workspace: g.workspace})
			if err != nil {
				return err
			}
			defer sess.Close()
			tools, err := sess.Tools(cmd.Context())
			if err != nil {
				return err
			}
			wsTrusted, _ := trust.Workspace(g.trustStore(), g.workspace, trustWorkspace)
			names := make([]string, 0, len(tools))
			for n := range tools {
				names = append(names, n)
			}
			sort.Strings(names)
			views := make([]toolView, 0, len(names))
			for _, n := range names {
				tool := tools[n]
				ann, err := replay.ParseAnnotations(tool.Annotations)
				d := replay.Decide(replay.Input{Class: replay.ClassLost, ServerTrusted: srv.Trust, WorkspaceTrusted: wsTrusted, Annotations: ann})
				if err != nil {
					d = replay.Decision{Verdict: replay.OutcomeUnknown, Reason: "malformed_annotations"}
				}
				raw := tool.Annotations
				if raw == nil {
					raw = json.RawMessage("null")
				}
				_, declared := replay.Safe(ann)
				if ann == nil {
					declared = replay.ReasonNoAnnotations
				}
				views = append(views, toolView{Name: n, Description: tool.Description, Annotations: raw,
					Replay: replayView{Safe: d.Verdict == replay.Replay, Reason: string(d.Reason), Declared: string(declared)}})
			}
			out := cmd.OutOrStdout()
			switch g.output {
			case "json":
				return writeJSON(out, views)
			case "jsonl":
				return writeJSONL(out, views)
			}
			t := newTable(out, "TOOL", "ANNOTATIONS", "REPLAY")
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
			if !srv.Trust || !wsTrusted {
				fmt.Fprintf(out, "\nReplay needs trust: true on server %q and a trusted workspace (mcpflow trust add, or --trust-workspace).\n", srv.Name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&trustWorkspace, "trust-workspace", false, "judge replay as if the workspace were trusted")
	return cmd
}
