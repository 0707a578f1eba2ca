package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/mcpflow/mcpflow/oauth"
	"github.com/mcpflow/mcpflow/service"
	"github.com/spf13/cobra"
)

type serversListOptions struct {
	ioStreams
	g              *globals
	workflow       *string
	noConnect      bool
	trustWorkspace bool
	names          []string
}

// serverView is the stable JSON shape of servers list.
type serverView struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	Target    string `json:"target"`
	Trust     bool   `json:"trust"`
	Origin    string `json:"origin,omitempty"`
	Connects  bool   `json:"connects"`
	Tools     int    `json:"tools"`
	Error     string `json:"error,omitempty"`
	// NotStarted: the server is defined by a file of a workspace the user
	// has not trusted, so a command that only looks did not start it.
	NotStarted bool `json:"not_started,omitempty"`
	// LeftOut, for a server asked for by name, says why its entry was
	// read and not used (Claude Code's settings for the project).
	LeftOut string `json:"left_out,omitempty"`
	// Shadows are the origins of entries of the same name this one wins
	// over; Warnings what of its entry mcpflow does not apply.
	Shadows  []string `json:"shadows,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Login, for a server with oauth:, says how it gets tokens: "unattended"
	// (client_credentials), or the person's login kept (see oauth.Describe).
	Login string `json:"login,omitempty"`
}

func newServersListCommand(g *globals, workflow *string, runF func(context.Context, *serversListOptions) error) *cobra.Command {
	o := &serversListOptions{g: g, workflow: workflow}
	cmd := &cobra.Command{
		Use:   "list [NAME]...",
		Short: "Show each server: transport, trust, and whether it connects",
		Long: `Show each configured server, or those named: transport, target, trust, and
whether it connects. A server named here whose entry was read and left out (a
.mcp.json server Claude Code's settings for the project disable) is shown with
why.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.names = streams(cmd), args
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runServersList(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.noConnect, "no-connect", false, "do not start or connect to the servers")
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only: start the servers its files define")
	return cmd
}

func runServersList(ctx context.Context, o *serversListOptions) error {
	svc, done, err := o.g.service(noJournal)
	if err != nil {
		return err
	}
	defer done()
	list, err := svc.Servers(ctx, *o.workflow, !o.noConnect, o.trustWorkspace, o.names...)
	if err != nil {
		return err
	}
	views := make([]serverView, 0, len(list))
	for _, st := range list {
		srv := st.Server
		v := serverView{Name: srv.Name, Transport: srv.Transport(), Target: target(srv), Trust: srv.Trust, Origin: srv.Origin, Connects: st.Checked && st.Err == nil, Tools: st.Tools,
			Shadows: srv.Shadows, Warnings: srv.Warnings}
		if o := srv.OAuth; o != nil {
			v.Login = oauth.Describe(st.Login, time.Now())
			if o.GrantType() == oauth.GrantClientCredentials {
				v.Login = "unattended (client_credentials)"
			}
		}
		if st.Disabled != nil {
			v.LeftOut = st.Disabled.Reason()
		} else if errors.Is(st.Err, service.ErrUntrustedWorkspace) {
			v.Error, v.NotStarted = "not started: defined by this workspace, which you have not trusted", true
		} else if st.Err != nil {
			v.Error = st.Err.Error()
		}
		views = append(views, v)
	}
	return o.g.printer(o.Out).print(views, func(w io.Writer) error {
		if len(views) == 0 {
			_, err := fmt.Fprintf(w, "no servers configured: add them to %s/mcpflow.yaml, pass --servers FILE, or --workflow FILE\n", o.g.workspace)
			return err
		}
		logins := slices.ContainsFunc(views, func(v serverView) bool { return v.Login != "" })
		cols := []string{"NAME", "TRANSPORT", "TARGET", "TRUST", "STATUS"}
		if logins {
			cols = append(cols, "LOGIN")
		}
		t := newTable(w, cols...)
		for _, v := range views {
			status := "not checked"
			switch {
			case v.LeftOut != "":
				status = "left out: " + v.LeftOut
			case o.noConnect:
			case v.NotStarted:
				status = v.Error
			case v.Connects:
				status = fmt.Sprintf("ok, %d tools", v.Tools)
			default:
				status = "error: " + firstLine(v.Error)
			}
			row := []string{v.Name, v.Transport, v.Target, trustWord(v.Trust), status}
			if logins {
				row = append(row, cmp.Or(v.Login, "-"))
			}
			t.row(row...)
		}
		if err := t.flush(); err != nil {
			return err
		}
		for _, v := range views {
			for _, s := range v.Shadows {
				fmt.Fprintf(o.Err, "warning: server %s: %s wins over the entry at %s\n", v.Name, v.Origin, s)
			}
			for _, s := range v.Warnings {
				fmt.Fprintf(o.Err, "warning: server %s: %s\n", v.Name, s)
			}
		}
		for _, v := range views {
			if v.NotStarted {
				_, err := fmt.Fprintln(w, "\nServers defined by this workspace's files are not started until you trust it: mcpflow trust add, or --trust-workspace for this command.")
				return err
			}
		}
		return nil
	})
}
