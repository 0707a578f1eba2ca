package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

type serversListOptions struct {
	ioStreams
	g         *globals
	workflow  *string
	noConnect bool
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
}

func newServersListCommand(g *globals, workflow *string, runF func(context.Context, *serversListOptions) error) *cobra.Command {
	o := &serversListOptions{g: g, workflow: workflow}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show each server: transport, trust, and whether it connects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runServersList(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.noConnect, "no-connect", false, "do not start or connect to the servers")
	return cmd
}

func runServersList(ctx context.Context, o *serversListOptions) error {
	svc, done, err := o.g.service(noJournal)
	if err != nil {
		return err
	}
	defer done()
	list, err := svc.Servers(ctx, *o.workflow, !o.noConnect)
	if err != nil {
		return err
	}
	views := make([]serverView, 0, len(list))
	for _, st := range list {
		srv := st.Server
		v := serverView{Name: srv.Name, Transport: srv.Transport(), Target: target(srv), Trust: srv.Trust, Origin: srv.Origin, Connects: st.Checked && st.Err == nil, Tools: st.Tools}
		if st.Err != nil {
			v.Error = firstLine(st.Err.Error())
		}
		views = append(views, v)
	}
	return o.g.printer(o.Out).print(views, func(w io.Writer) error {
		if len(views) == 0 {
			_, err := fmt.Fprintf(w, "no servers configured: add them to %s/mcpflow.yaml, pass --servers FILE, or --workflow FILE\n", o.g.workspace)
			return err
		}
		t := newTable(w, "NAME", "TRANSPORT", "TARGET", "TRUST", "STATUS")
		for _, v := range views {
			status := "not checked"
			if !o.noConnect {
				status = fmt.Sprintf("ok, %d tools", v.Tools)
				if !v.Connects {
					status = "error: " + v.Error
				}
			}
			t.row(v.Name, v.Transport, v.Target, trustWord(v.Trust), status)
		}
		return t.flush()
	})
}
