package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/upstream"
)

// serversReadsOptions are the options of servers resources and servers
// prompts.
type serversReadsOptions struct {
	ioStreams
	g              *globals
	workflow       *string
	server         string
	trustWorkspace bool
}

func newServersResourcesCommand(g *globals, workflow *string, runF func(context.Context, *serversReadsOptions) error) *cobra.Command {
	o := &serversReadsOptions{g: g, workflow: workflow}
	cmd := &cobra.Command{
		Use:   "resources NAME",
		Short: "Show the resources and resource templates a server offers",
		Long: `Show the resources a server lists, and its resource templates: the URIs a
workflow step reads with resource: URI. A read changes nothing, so a lost read is
always sent again, whatever the server's trust.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.server = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runServersResources(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only: it may start the servers its files define")
	return cmd
}

func newServersPromptsCommand(g *globals, workflow *string, runF func(context.Context, *serversReadsOptions) error) *cobra.Command {
	o := &serversReadsOptions{g: g, workflow: workflow}
	cmd := &cobra.Command{
		Use:   "prompts NAME",
		Short: "Show the prompts a server offers and the arguments they take",
		Long: `Show the prompts a server lists and the arguments each takes: what a workflow
step gets with prompt: NAME and its arguments in with:. Getting a prompt changes
nothing, so a lost one is always sent again, whatever the server's trust.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.server = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runServersPrompts(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only: it may start the servers its files define")
	return cmd
}

// resourcesView is the stable JSON shape of servers resources.
type resourcesView struct {
	Resources []resourceView `json:"resources"`
	Templates []templateView `json:"templates"`
}

type resourceView struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
	Size        int64  `json:"size,omitempty"`
}

type templateView struct {
	URITemplate string `json:"uri_template"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
}

// promptView is the stable JSON shape of one prompt of servers prompts.
type promptView struct {
	Name        string               `json:"name"`
	Title       string               `json:"title,omitempty"`
	Description string               `json:"description,omitempty"`
	Arguments   []promptArgumentView `json:"arguments"`
}

type promptArgumentView struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
}

func runServersResources(ctx context.Context, o *serversReadsOptions) error {
	svc, done, err := o.g.service(noJournal)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.Resources(ctx, service.ToolsRequest{Server: o.server, Workflow: *o.workflow, TrustWorkspace: o.trustWorkspace})
	if err != nil {
		return err
	}
	v := resourcesView{Resources: []resourceView{}, Templates: []templateView{}}
	for _, r := range rep.Resources {
		v.Resources = append(v.Resources, resourceView{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType, Size: r.Size})
	}
	for _, t := range rep.Templates {
		v.Templates = append(v.Templates, templateView{URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MIMEType})
	}
	return o.g.printer(o.Out).print(v, func(w io.Writer) error {
		if len(v.Resources)+len(v.Templates) == 0 {
			_, err := fmt.Fprintf(w, "server %q lists no resources\n", rep.Server.Name)
			return err
		}
		if len(v.Resources) > 0 {
			t := newTable(w, "URI", "NAME", "MIME", "DESCRIPTION")
			for _, r := range v.Resources {
				t.row(r.URI, r.Name, cmp.Or(r.MIMEType, "-"), cmp.Or(firstLine(r.Description), "-"))
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		if len(v.Templates) > 0 {
			if len(v.Resources) > 0 {
				fmt.Fprintln(w)
			}
			t := newTable(w, "TEMPLATE", "NAME", "MIME", "DESCRIPTION")
			for _, r := range v.Templates {
				t.row(r.URITemplate, r.Name, cmp.Or(r.MIMEType, "-"), cmp.Or(firstLine(r.Description), "-"))
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		_, err := fmt.Fprintf(w, "\nRead one in a workflow with resource: URI (and server: %s); a lost read is always sent again.\n", rep.Server.Name)
		return err
	})
}

func runServersPrompts(ctx context.Context, o *serversReadsOptions) error {
	svc, done, err := o.g.service(noJournal)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.Prompts(ctx, service.ToolsRequest{Server: o.server, Workflow: *o.workflow, TrustWorkspace: o.trustWorkspace})
	if err != nil {
		return err
	}
	views := make([]promptView, 0, len(rep.Prompts))
	for _, p := range rep.Prompts {
		v := promptView{Name: p.Name, Title: p.Title, Description: p.Description, Arguments: []promptArgumentView{}}
		for _, a := range p.Arguments {
			v.Arguments = append(v.Arguments, promptArgumentView{Name: a.Name, Description: a.Description, Required: a.Required})
		}
		views = append(views, v)
	}
	return o.g.printer(o.Out).print(views, func(w io.Writer) error {
		if len(views) == 0 {
			_, err := fmt.Fprintf(w, "server %q lists no prompts\n", rep.Server.Name)
			return err
		}
		t := newTable(w, "PROMPT", "ARGUMENTS", "DESCRIPTION")
		for _, p := range rep.Prompts {
			t.row(p.Name, argumentsText(p.Arguments), cmp.Or(firstLine(p.Description), "-"))
		}
		if err := t.flush(); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "\nGet one in a workflow with prompt: NAME (and server: %s), its arguments, strings, in with:.\n", rep.Server.Name)
		return err
	})
}

// argumentsText is a prompt's arguments as the ARGUMENTS column shows
// them: "text (required), focus"; "-" for none.
func argumentsText(args []upstream.PromptArgument) string {
	if len(args) == 0 {
		return "-"
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a.Name
		if a.Required {
			out[i] += " (required)"
		}
	}
	return strings.Join(out, ", ")
}
