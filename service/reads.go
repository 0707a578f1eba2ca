package service

import (
	"context"

	"github.com/mcpflow/mcpflow/upstream"
)

// ResourcesReport is a server's resources and resource templates.
type ResourcesReport struct {
	Server    *upstream.Server
	Resources []upstream.Resource         // by URI
	Templates []upstream.ResourceTemplate // by template
}

// PromptsReport is a server's prompts.
type PromptsReport struct {
	Server  *upstream.Server
	Prompts []upstream.Prompt // by name
}

// Resources connects to a server and lists its resources and resource
// templates. req is a ToolsRequest: the server, and the workflow whose
// servers are used too; nothing is judged (a read needs no trust).
func (s *Service) Resources(ctx context.Context, req ToolsRequest) (*ResourcesReport, error) {
	sess, err := s.connectToList(ctx, req)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	resources, templates, err := sess.Resources(ctx)
	if err != nil {
		return nil, err
	}
	return &ResourcesReport{Server: sess.Server(), Resources: resources, Templates: templates}, nil
}

// Prompts connects to a server and lists its prompts (see Resources).
func (s *Service) Prompts(ctx context.Context, req ToolsRequest) (*PromptsReport, error) {
	sess, err := s.connectToList(ctx, req)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	prompts, err := sess.Prompts(ctx)
	if err != nil {
		return nil, err
	}
	return &PromptsReport{Server: sess.Server(), Prompts: prompts}, nil
}

// connectToList connects to the server req names for a command that only
// looks: as Tools does, a server is found among the configured ones (and
// the workflow's), and started only where such a command may start it
// (mayStart).
func (s *Service) connectToList(ctx context.Context, req ToolsRequest) (*upstream.Session, error) {
	srv, err := s.lookServer(req.Server, req.Workflow, req.TrustWorkspace)
	if err != nil {
		return nil, err
	}
	return upstream.Connect(ctx, srv, s.lookOptions())
}
