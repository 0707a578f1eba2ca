package oauth

import (
	"context"
	"crypto/rand"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// LoginOptions say whom a login is for and how to reach the person.
type LoginOptions struct {
	// Server is the entry's name; Endpoint its URL, expanded; Config its
	// oauth: mapping, secrets expanded.
	Server   string
	Endpoint string
	Config   Config
	Store    *Store
	// HTTPClient reaches the server (with its configured headers) and the
	// authorization server.
	HTTPClient *http.Client
	// Open shows the person the authorization URL (a browser, or the
	// terminal). It must not block until the person is done.
	Open func(authURL string) error
	// Client names mcpflow to the server.
	Client *mcp.Implementation
}

// LoginTimeout bounds how long a login waits for the person.
const LoginTimeout = 5 * time.Minute

// LogIn runs the authorization code flow with PKCE for one server: it
// connects without a token, and when the server answers 401 (or, if it
// never does, at once) it discovers the authorization server, registers
// the client if need be, sends the person to the authorization URL, takes
// the code at a loopback redirect, exchanges it for tokens and keeps them
// in the Store. It then lists the server's tools with the new token, and
// returns the login and how many tools there are.
func LogIn(ctx context.Context, o LoginOptions) (*Login, int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Config.RedirectPort)))
	if err != nil {
		return nil, 0, fmt.Errorf("listening for the login's redirect: %w", err)
	}
	redirectURL := "http://" + ln.Addr().String() + "/callback"
	results := make(chan redirect, 1)
	srv := &http.Server{Handler: callback(results), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) // ends at Close below
	defer srv.Close()

	prev, err := o.Store.Load(o.Endpoint)
	if err != nil {
		return nil, 0, err
	}
	var wanted []string
	if prev != nil {
		wanted = prev.Wanted
	}
	var conf *oauth2.Config
	var tok *oauth2.Token
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	fetch := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		select { // a redirect left over from an earlier round
		case <-results:
		default:
		}
		if err := o.Open(args.URL); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, LoginTimeout)
		defer cancel()
		select {
		case r := <-results:
			if r.err != "" {
				return nil, fmt.Errorf("the authorization server refused the login (%s)", r.err)
			}
			return &r.AuthorizationResult, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("no answer from the authorization server's redirect within %s", LoginTimeout)
		}
	}
	if !hasResourceMetadata(ctx, o.Endpoint, hc) {
		if asm := originMeta(ctx, o.Endpoint, hc); asm != nil && strings.TrimSuffix(asm.Issuer, "/") != origin(o.Endpoint) {
			return legacyLogIn(ctx, o, asm, redirectURL, union(o.Config.Scopes, wanted), fetch, hc)
		}
	}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirectURL,
		AuthorizationCodeFetcher: fetch,
		ScopeFilter:              func(found []string) []string { return union(union(found, o.Config.Scopes), wanted) },
		RequestRefreshToken:      true,
		Client:                   hc,
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			conf, tok = c, t
			return c.TokenSource(ctx, t), nil
		},
	}
	switch {
	case o.Config.ClientID != "":
		pre := &oauthex.ClientCredentials{ClientID: o.Config.ClientID}
		if o.Config.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: o.Config.ClientSecret}
		}
		cfg.PreregisteredClient = pre
	default:
		if o.Config.ClientMetadataURL != "" {
			cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: o.Config.ClientMetadataURL}
		}
		cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:  []string{redirectURL},
			ClientName:    "mcpflow",
			GrantTypes:    []string{"authorization_code", "refresh_token"},
			ResponseTypes: []string{"code"},
		}}
	}
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("server %q: %w", o.Server, err)
	}
	client := mcp.NewClient(o.Client, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: o.Endpoint, HTTPClient: hc, OAuthHandler: h}, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("server %q: %w", o.Server, err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err == nil && tok == nil {
		// The server let everything so far through without a token: log in
		// all the same, as if it had asked.
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, o.Endpoint, nil)
		resp := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: http.NoBody}
		if err = h.Authorize(ctx, req, resp); err == nil {
			tools, err = cs.ListTools(ctx, nil)
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("server %q: %w", o.Server, err)
	}
	if tok == nil {
		return nil, 0, fmt.Errorf("server %q: the login ended without a token", o.Server)
	}
	l, err := keep(o, conf, tok)
	if err != nil {
		return nil, 0, err
	}
	return l, len(tools.Tools), nil
}

// keep stores the login the tokens make.
func keep(o LoginOptions, conf *oauth2.Config, tok *oauth2.Token) (*Login, error) {
	l := &Login{URL: o.Endpoint, Server: o.Server, ClientID: conf.ClientID, Who: who(tok), AuthStyle: conf.Endpoint.AuthStyle,
		TokenURL: conf.Endpoint.TokenURL, Scopes: sortedUnique(conf.Scopes), Token: tok, At: time.Now().UTC()}
	if conf.ClientSecret != o.Config.ClientSecret {
		l.ClientSecret = conf.ClientSecret // issued at registration
	}
	// Under the lock: a refresh of the old login under way must not
	// write it back over this one.
	if err := o.Store.locked(o.Endpoint, func() error { return o.Store.Save(l) }); err != nil {
		return nil, err
	}
	return l, nil
}

// legacyLogIn is the authorization code flow with PKCE against the
// metadata a server without protected resource metadata serves at its
// origin (2025-03-26), whose issuer is not the origin, which go-sdk's
// handler refuses (see originMeta): the client registered (or given),
// the person sent to the authorization endpoint, the code exchanged.
func legacyLogIn(ctx context.Context, o LoginOptions, asm *oauthex.AuthServerMeta, redirectURL string, scopes []string,
	fetch auth.AuthorizationCodeFetcher, hc *http.Client) (*Login, int, error) {
	conf := &oauth2.Config{ClientID: o.Config.ClientID, ClientSecret: o.Config.ClientSecret, RedirectURL: redirectURL, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint}}
	if conf.ClientID == "" {
		if asm.RegistrationEndpoint == "" {
			return nil, 0, fmt.Errorf("server %q: its authorization server offers no registration: give the entry a client_id", o.Server)
		}
		reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{redirectURL}, ClientName: "mcpflow", GrantTypes: []string{"authorization_code", "refresh_token"},
			ResponseTypes: []string{"code"}, ApplicationType: "native"}, hc)
		if err != nil {
			return nil, 0, fmt.Errorf("server %q: registering mcpflow: %w", o.Server, err)
		}
		conf.ClientID, conf.ClientSecret = reg.ClientID, reg.ClientSecret
		if reg.TokenEndpointAuthMethod == "client_secret_post" || reg.TokenEndpointAuthMethod == "none" {
			conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
		}
	}
	verifier, state := oauth2.GenerateVerifier(), rand.Text()
	res, err := fetch(ctx, &auth.AuthorizationArgs{URL: conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", o.Endpoint))})
	if err != nil {
		return nil, 0, fmt.Errorf("server %q: %w", o.Server, err)
	}
	if res.State != state {
		return nil, 0, fmt.Errorf("server %q: the redirect's state is not the login's", o.Server)
	}
	tok, err := conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, hc), res.Code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", o.Endpoint))
	if err != nil {
		return nil, 0, fmt.Errorf("server %q: exchanging the code: %w", o.Server, tokenError(err))
	}
	// The server lists its tools with the token, as a run will send it.
	withToken := *hc
	withToken.Transport = &bearer{next: hc.Transport, host: hostOf(o.Endpoint), token: tok.AccessToken}
	cs, err := mcp.NewClient(o.Client, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: o.Endpoint, HTTPClient: &withToken}, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("server %q: %w", o.Server, err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("server %q: %w", o.Server, err)
	}
	l, err := keep(o, conf, tok)
	if err != nil {
		return nil, 0, err
	}
	return l, len(tools.Tools), nil
}

// bearer adds a token to every request to host.
type bearer struct {
	next  http.RoundTripper
	host  string
	token string
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	if req.URL.Host != b.host {
		return next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return next.RoundTrip(r)
}

// origin is endpoint's scheme and host.
func origin(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// redirect is what the authorization server's redirect said: a code, or
// the error code it refused with.
type redirect struct {
	auth.AuthorizationResult
	err string
}

// callback answers the authorization server's redirect and hands what it
// said to the waiting login, once.
func callback(results chan<- redirect) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		rd := redirect{AuthorizationResult: auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, err: q.Get("error")}
		if rd.err == "" && rd.Code == "" {
			http.Error(w, "mcpflow: no authorization code in the redirect", http.StatusBadRequest)
			return
		}
		select {
		case results <- rd:
			if rd.err != "" {
				fmt.Fprintf(w, "<p>mcpflow: the login was refused (%s). You may close this tab.</p>", html.EscapeString(rd.err))
				return
			}
			fmt.Fprint(w, "<p>mcpflow: login received. You may close this tab.</p>")
		default:
			fmt.Fprint(w, "<p>mcpflow: this login is already done. You may close this tab.</p>")
		}
	})
}

// Describe says who a login is for and until when, for servers list; no
// token is shown.
func Describe(l *Login, now time.Time) string {
	if l == nil || l.Token == nil {
		return "not logged in"
	}
	var b strings.Builder
	b.WriteString("logged in")
	if l.Who != "" {
		fmt.Fprintf(&b, " as %s", l.Who)
	}
	if until := l.Until(); !until.IsZero() {
		if until.After(now) {
			fmt.Fprintf(&b, " until %s", until.UTC().Format(time.RFC3339))
		} else if l.Refreshable() {
			b.WriteString(", token expired (refreshed at next use)")
		} else {
			b.WriteString(", expired")
		}
	}
	if len(l.Scopes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(l.Scopes, " "))
	}
	return b.String()
}

// who reads whom a token is for from its ID token, else from the access
// token when that is a JWT: the email, else the preferred user name, else
// the subject. The claims are shown, not trusted: nothing is decided on
// them, so the signature is not checked.
func who(tok *oauth2.Token) string {
	var jwts []string
	if id, ok := tok.Extra("id_token").(string); ok {
		jwts = append(jwts, id)
	}
	jwts = append(jwts, tok.AccessToken)
	for _, raw := range jwts {
		claims := jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(raw, claims); err != nil {
			continue
		}
		for _, k := range []string{"email", "preferred_username", "sub"} {
			if v, ok := claims[k].(string); ok && v != "" {
				return v
			}
		}
	}
	return ""
}
