package service

import (
	"context"

	"github.com/mcpflow/mcpflow/oauth"
	"github.com/mcpflow/mcpflow/upstream"
)

// LoginRequest names the server a person logs in to. Open shows the
// person the authorization server's URL.
type LoginRequest struct {
	Server   string
	Workflow string
	// TrustWorkspace lets a server defined by the workspace's files be
	// reached for this command only.
	TrustWorkspace bool
	Open           func(authURL string) error
}

// LoginReport is what a login left.
type LoginReport struct {
	Server *upstream.Server
	// Login is the person's login kept; nil for a server that gets its
	// tokens unattended (client_credentials), which was reached with one.
	Login *oauth.Login
	Tools int
}

// Login logs a person in to a server with oauth: (mcpflow servers login).
// The tokens are kept in the store every process on this machine reads
// (runs, mcpflow server, workers), never in the journal. A server with
// grant client_credentials needs no person: it is reached once with a
// token of its own, to show that the credentials work.
func (s *Service) Login(ctx context.Context, req LoginRequest) (*LoginReport, error) {
	srv, err := s.lookServer(req.Server, req.Workflow, req.TrustWorkspace)
	if err != nil {
		return nil, err
	}
	if srv.OAuth == nil {
		return nil, invalid("server %q has no oauth: mapping, so there is nothing to log in to (add oauth: {} to its entry for a person's login, or oauth: {grant: client_credentials, client_id: …, client_secret: ${SECRET}} for unattended runs)", srv.Name)
	}
	rep := &LoginReport{Server: srv}
	if srv.OAuth.GrantType() == oauth.GrantClientCredentials {
		sess, err := upstream.Connect(ctx, srv, s.lookOptions())
		if err != nil {
			return nil, err
		}
		defer sess.Close()
		tools, err := sess.Tools(ctx)
		rep.Tools = len(tools)
		return rep, err
	}
	rep.Login, rep.Tools, err = upstream.LogIn(ctx, srv, s.lookOptions(), req.Open)
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// Logout forgets the login kept for a server; it reports whether there
// was one.
func (s *Service) Logout(server, workflow string) (*upstream.Server, bool, error) {
	set, err := s.ServerSet(workflow)
	if err != nil {
		return nil, false, err
	}
	srv, err := set.Lookup(server)
	if err != nil {
		return nil, false, invalid("%v", err)
	}
	if srv.OAuth == nil {
		return srv, false, invalid("server %q has no oauth: mapping, so mcpflow keeps no login for it", srv.Name)
	}
	had, err := upstream.LogOut(srv, s.lookOptions())
	return srv, had, err
}

// lookServer is the entry of a server a command that only looks may reach.
func (s *Service) lookServer(name, workflow string, trustWorkspace bool) (*upstream.Server, error) {
	set, err := s.ServerSet(workflow)
	if err != nil {
		return nil, err
	}
	srv, err := set.Lookup(name)
	if err != nil {
		if d, err := s.leftOut(name, err); d != nil || workflow != "" {
			return nil, err
		}
		return nil, invalid("%v; servers a workflow declares need --workflow FILE", err)
	}
	if err := s.mayStart(srv, trustWorkspace); err != nil {
		return nil, &invalidError{msg: err.Error(), cause: err}
	}
	return srv, nil
}
