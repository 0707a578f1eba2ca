package upstream

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/oauth"
)

// LogIn has a person log in to srv, a url server with oauth: (the
// authorization code grant): see oauth.LogIn. open shows the person the
// authorization URL. It returns the login kept and how many tools the
// server lists with it.
func LogIn(ctx context.Context, srv *Server, opts *Options, open func(authURL string) error) (*oauth.Login, int, error) {
	o, store, endpoint, err := loginPlace(srv, opts)
	if err != nil {
		return nil, 0, err
	}
	cfg, err := srv.OAuthConfig(o.Workspace, o.LookupEnv)
	if err != nil {
		return nil, 0, err
	}
	headers := http.Header{}
	for _, k := range sortedKeys(srv.Headers) {
		v, err := srv.expand(placeKey("headers", k), srv.Headers[k], o.LookupEnv)
		if err != nil {
			return nil, 0, err
		}
		headers.Set(k, v)
	}
	s := &Session{server: srv}
	defer s.release()
	return oauth.LogIn(ctx, oauth.LoginOptions{
		Server: srv.Name, Endpoint: endpoint, Config: cfg, Store: store,
		HTTPClient: s.httpClient(o, endpoint, headers), Open: open,
		Client: &mcp.Implementation{Name: "mcpflow", Version: Version},
	})
}

// StoredLogin is the login kept for srv, nil when there is none.
func StoredLogin(srv *Server, opts *Options) (*oauth.Login, error) {
	_, store, endpoint, err := loginPlace(srv, opts)
	if err != nil {
		return nil, err
	}
	return store.Load(endpoint)
}

// LogOut forgets the login kept for srv; it reports whether there was one.
func LogOut(srv *Server, opts *Options) (bool, error) {
	_, store, endpoint, err := loginPlace(srv, opts)
	if err != nil {
		return false, err
	}
	return store.Remove(endpoint)
}

// loginPlace is the options with defaults, the store and the server's
// URL, expanded, of a server whose logins are kept.
func loginPlace(srv *Server, opts *Options) (Options, *oauth.Store, string, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := srv.Validate(); err != nil {
		return o, nil, "", err
	}
	if srv.OAuth == nil {
		return o, nil, "", &ConfigError{Server: srv.Name, Msg: "has no oauth: mapping, so nothing to log in to (expected oauth: {} on a url server that asks for a login, or oauth: {grant: client_credentials, …})"}
	}
	if o.Workspace == "" {
		o.Workspace = "."
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	o.LookupEnv = srv.lookup(o.LookupEnv)
	store := o.Logins
	if store == nil {
		var err error
		if store, err = oauth.DefaultStore(); err != nil {
			return o, nil, "", err
		}
	}
	endpoint, err := srv.expand("url", srv.URL, o.LookupEnv)
	if err != nil {
		return o, nil, "", err
	}
	if endpoint == "" {
		return o, nil, "", fmt.Errorf("server %q: empty url", srv.Name)
	}
	return o, store, endpoint, nil
}
