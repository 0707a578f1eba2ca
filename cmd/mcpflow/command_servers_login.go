package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/oauth"
	"github.com/mcpflow/mcpflow/service"
)

type serversLoginOptions struct {
	ioStreams
	g              *globals
	workflow       *string
	server         string
	trustWorkspace bool
}

func newServersLoginCommand(g *globals, workflow *string) *cobra.Command {
	o := &serversLoginOptions{g: g, workflow: workflow}
	cmd := &cobra.Command{
		Use:   "login NAME",
		Short: "Log in to a remote server that asks for OAuth (its entry has oauth:)",
		Long: `Log in to a remote MCP server whose entry has oauth: (the authorization code
grant, with PKCE): mcpflow finds the server's authorization server, registers
itself there if the entry gives no client_id, and sends you to log in. The
URL is opened with $BROWSER when it is set, and printed either way; the
authorization server sends you back to a port mcpflow listens on, on
127.0.0.1.

The tokens are kept in $XDG_CONFIG_HOME/mcpflow/tokens (~/.config/mcpflow/
tokens), readable by you only, never in the journal; runs, mcpflow server and
workers on this machine use them and refresh them. A run that meets a login
it cannot refresh blocks (exit 3) naming this command; resume it after.

For a server with grant: client_credentials there is no one to log in: the
command checks that its credentials get a token.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.server = streams(cmd), args[0]
			return runServersLogin(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only: reach servers its files define")
	return cmd
}

func runServersLogin(ctx context.Context, o *serversLoginOptions) error {
	svc, done, err := o.g.service(noJournal)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.Login(ctx, service.LoginRequest{Server: o.server, Workflow: *o.workflow, TrustWorkspace: o.trustWorkspace,
		Open: func(u string) error { return openBrowser(o, u) }})
	if err != nil {
		return err
	}
	if rep.Login == nil {
		_, err = fmt.Fprintf(o.Out, "Server %s gets its tokens unattended (client_credentials): one was granted, and the server lists %d tools.\n", rep.Server.Name, rep.Tools)
		return err
	}
	_, err = fmt.Fprintf(o.Out, "Logged in to server %s: %s; the server lists %d tools.\n", rep.Server.Name, oauth.Describe(rep.Login, time.Now()), rep.Tools)
	return err
}

// openBrowser shows the person the authorization URL: it is printed, and
// opened with $BROWSER when that is set. The browser is not waited for
// (the redirect ends the login), but it is reaped.
func openBrowser(o *serversLoginOptions, authURL string) error {
	fmt.Fprintf(o.Err, "To log in to server %s, open:\n\n  %s\n\n", o.server, authURL)
	browser := strings.Fields(os.Getenv("BROWSER"))
	if len(browser) == 0 {
		fmt.Fprintln(o.Err, "Waiting for the authorization server to send you back (5 minutes at most)…")
		return nil
	}
	cmd := exec.Command(browser[0], append(browser[1:], authURL)...)
	cmd.Stdout, cmd.Stderr = o.Err, o.Err
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(o.Err, "$BROWSER could not be started (%v): open the URL yourself.\n", err)
		return nil
	}
	go cmd.Wait() // the browser's owner is the person; this only reaps it
	fmt.Fprintln(o.Err, "Opened with $BROWSER; waiting for the authorization server to send you back (5 minutes at most)…")
	return nil
}

func newServersLogoutCommand(g *globals, workflow *string) *cobra.Command {
	return &cobra.Command{
		Use:   "logout NAME",
		Short: "Forget the login kept for a server",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := streams(cmd)
			svc, done, err := g.service(noJournal)
			if err != nil {
				return err
			}
			defer done()
			srv, had, err := svc.Logout(args[0], *workflow)
			if err != nil {
				return err
			}
			if !had {
				_, err = fmt.Fprintf(s.Out, "Not logged in to server %s: nothing to forget.\n", srv.Name)
				return err
			}
			_, err = fmt.Fprintf(s.Out, "Logged out of server %s: its tokens are forgotten here (the authorization server may still hold the grant).\n", srv.Name)
			return err
		},
	}
}
