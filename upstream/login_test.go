package upstream

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/oauth"
	"github.com/mcpflow/mcpflow/oauth/oauthtest"
	"github.com/mcpflow/mcpflow/replay"
	"go.yaml.in/yaml/v3"
)

// loginServer is an entry for the oauthtest server, and options whose
// logins are kept in a store of the test's own.
func loginServer(t *testing.T, as *oauthtest.Server, cfg *oauth.Config) (*Server, *Options, *oauth.Store) {
	t.Helper()
	store := &oauth.Store{Dir: filepath.Join(t.TempDir(), "tokens")}
	srv := &Server{Name: "tracker", URL: as.URL, OAuth: cfg}
	return srv, &Options{Workspace: t.TempDir(), Logins: store}, store
}

func callCount(t *testing.T, s *Session) {
	t.Helper()
	res, err := s.Call(t.Context(), "count", json.RawMessage(`{}`), nil, nil)
	if err != nil {
		t.Fatalf("call with the login: %v", err)
	}
	if res.IsError {
		t.Fatalf("call with the login: tool error %+v", res.Content)
	}
}

// A person logs in once (authorization code, PKCE, dynamic registration,
// a loopback redirect); a run's session then calls with the kept token,
// which is refreshed when it is about to expire and kept refreshed; once
// the refresh token is refused, the session says which command fixes it,
// before anything reached the server.
func TestLoginThenRunsUseAndRefreshTheToken(t *testing.T) {
	as := oauthtest.New(t)
	as.SetScopes("issues:read")
	srv, opts, store := loginServer(t, as, &oauth.Config{Scopes: []string{"issues:write"}})

	if _, err := Connect(t.Context(), srv, opts); !isLoginRequired(err, oauth.WhyNone) {
		t.Fatalf("connect before any login: %v, want a LoginRequiredError (no login)", err)
	}
	if as.Calls.Load() != 0 {
		t.Fatal("a call reached the server without a login")
	}

	l, tools, err := LogIn(t.Context(), srv, opts, oauthtest.Browse)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	if tools != 1 || l.Token == nil || !as.Issued(l.Token.AccessToken) || as.Authorizations.Load() != 1 {
		t.Fatalf("login: %+v, %d tools, %d authorizations; want the server's one tool and a token it issued", l, tools, as.Authorizations.Load())
	}
	if !strings.Contains(strings.Join(l.Scopes, " "), "issues:read") || !strings.Contains(strings.Join(l.Scopes, " "), "issues:write") {
		t.Errorf("scopes asked for: %v, want the server's (issues:read) and the entry's (issues:write)", l.Scopes)
	}
	fi, err := os.Stat(store.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("token directory: %v %v, want mode 0700", fi.Mode(), err)
	}
	files, _ := filepath.Glob(filepath.Join(store.Dir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("login files: %v, want one", files)
	}
	if fi, _ := os.Stat(files[0]); fi.Mode().Perm() != 0o600 {
		t.Errorf("login file mode %v, want 0600", fi.Mode().Perm())
	}

	s, err := Connect(t.Context(), srv, opts)
	if err != nil {
		t.Fatalf("connect with the login: %v", err)
	}
	callCount(t, s)
	s.Close()

	// A token about to expire is refreshed before use, and the new one
	// kept: the old refresh token is spent (rotated).
	kept, _ := store.Load(as.URL)
	kept.Token.Expiry = time.Now().Add(10 * time.Second)
	if err := store.Save(kept); err != nil {
		t.Fatal(err)
	}
	s, err = Connect(t.Context(), srv, opts)
	if err != nil {
		t.Fatalf("connect with a token about to expire: %v", err)
	}
	callCount(t, s)
	s.Close()
	again, _ := store.Load(as.URL)
	if as.Refreshes.Load() != 1 || again.Token.AccessToken == kept.Token.AccessToken || again.Token.RefreshToken == kept.Token.RefreshToken {
		t.Errorf("after a refresh: %d refreshes, token kept changed: %v; want one refresh, kept", as.Refreshes.Load(), again.Token.AccessToken != kept.Token.AccessToken)
	}

	// Revoked, and the refresh token refused: a person must log in again.
	as.Revoke()
	as.RefuseRefresh.Store(true)
	again.Token.Expiry = time.Now().Add(10 * time.Second)
	store.Save(again)
	calls := as.Calls.Load()
	_, err = Connect(t.Context(), srv, opts)
	if !isLoginRequired(err, oauth.WhyExpired) || !strings.Contains(err.Error(), "mcpflow servers login tracker") {
		t.Fatalf("connect with a login that cannot be refreshed: %v, want a LoginRequiredError (expired) naming the command", err)
	}
	if as.Calls.Load() != calls {
		t.Error("a call reached the server")
	}
}

func isLoginRequired(err error, why string) bool {
	var lr *oauth.LoginRequiredError
	return errors.As(err, &lr) && lr.Why == why && lr.Server == "tracker"
}

// A call refused with 403 insufficient_scope (step-up) fails with a
// LoginRequiredError naming the scopes, which the next login asks for.
func TestStepUpIsLeftToTheNextLogin(t *testing.T) {
	as := oauthtest.New(t)
	srv, opts, store := loginServer(t, as, &oauth.Config{})
	if _, _, err := LogIn(t.Context(), srv, opts, oauthtest.Browse); err != nil {
		t.Fatal(err)
	}
	s, err := Connect(t.Context(), srv, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	as.SetScopes("admin") // from now on
	_, err = s.Call(t.Context(), "count", json.RawMessage(`{}`), nil, nil)
	var lr *oauth.LoginRequiredError
	if !errors.As(err, &lr) || lr.Why != oauth.WhyScopes || strings.Join(lr.Scopes, " ") != "admin" {
		t.Fatalf("call refused for scope: %v, want a LoginRequiredError for scope admin", err)
	}
	// Refused before the server acted on it: not delivered.
	if c := Classify(err); c != replay.ClassNotDelivered || as.Calls.Load() != 0 {
		t.Errorf("the call refused for scope: class %v, %d calls ran; want not delivered, none", c, as.Calls.Load())
	}
	l, _ := store.Load(as.URL)
	if strings.Join(l.Wanted, " ") != "admin" {
		t.Errorf("wanted scopes kept: %v, want admin for the next login", l.Wanted)
	}
	l, _, err = LogIn(t.Context(), srv, opts, oauthtest.Browse)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(l.Scopes, " "), "admin") || len(l.Wanted) != 0 {
		t.Errorf("second login: scopes %v, wanted %v; want admin asked for and nothing left wanted", l.Scopes, l.Wanted)
	}
}

// client_credentials: no person; the client authenticates with its secret
// (basic) and the sessions of the process share the token.
func TestClientCredentialsNeedNoPerson(t *testing.T) {
	as := oauthtest.New(t)
	srv, opts, store := loginServer(t, as, &oauth.Config{Grant: oauth.GrantClientCredentials, ClientID: as.ClientID, ClientSecret: "${TRACKER_SECRET}"})
	opts.LookupEnv = func(k string) (string, bool) {
		if k == "TRACKER_SECRET" {
			return as.ClientSecret, true
		}
		return "", false
	}
	for range 2 {
		s, err := Connect(t.Context(), srv, opts)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		callCount(t, s)
		s.Close()
	}
	if as.ClientCredentials.Load() != 1 || as.LastTokenAuth.Load() != "basic" {
		t.Errorf("token requests: %d by %v, want one, authenticated with client_secret_basic", as.ClientCredentials.Load(), as.LastTokenAuth.Load())
	}
	if files, _ := filepath.Glob(filepath.Join(store.Dir, "*")); len(files) != 0 {
		t.Errorf("client credentials tokens were kept on disk: %v", files)
	}
}

// client_credentials with private_key_jwt: the client signs an assertion
// with its key, read from a file relative to the workspace.
func TestClientCredentialsWithASignedJWT(t *testing.T) {
	as := oauthtest.New(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	as.JWTKey = &key.PublicKey
	der, _ := x509.MarshalECPrivateKey(key)
	srv, opts, _ := loginServer(t, as, &oauth.Config{Grant: oauth.GrantClientCredentials, ClientID: as.ClientID, PrivateKey: "keys/ci.pem"})
	os.MkdirAll(filepath.Join(opts.Workspace, "keys"), 0o700)
	if err := os.WriteFile(filepath.Join(opts.Workspace, "keys", "ci.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Connect(t.Context(), srv, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer s.Close()
	callCount(t, s)
	if as.LastTokenAuth.Load() != "jwt" {
		t.Errorf("token request authenticated by %v, want a signed JWT", as.LastTokenAuth.Load())
	}
}

// An oauth: mapping is read strictly, and a secret written into the file
// is warned about.
func TestOAuthEntries(t *testing.T) {
	for _, c := range []struct {
		yaml, err, warn string
	}{
		{yaml: "url: https://t.example/mcp\noauth: {}"},
		{yaml: "url: https://t.example/mcp\noauth: {grant: client_credentials, client_id: ci, client_secret: \"${S}\", scopes: [a, b]}"},
		{yaml: "url: https://t.example/mcp\noauth: {grant: client_credentials, client_id: ci, client_secret: hunter2}", warn: "t.yaml:2:66: oauth client_secret is written into the file"},
		{yaml: "url: https://t.example/mcp\noauth: {grant: device}", err: `t.yaml:2:16: server s: oauth: unknown grant "device" (expected authorization_code or client_credentials)`},
		{yaml: "url: https://t.example/mcp\noauth: {grant: client_credentials}", err: "client_credentials needs a client registered beforehand"},
		{yaml: "url: https://t.example/mcp\noauth: {client_secret: x}", err: "client_secret without client_id"},
		{yaml: "url: https://t.example/mcp\noauth: {client_id: a, client_secret: x, private_key: k.pem}", err: "sets both client_secret and private_key"},
		{yaml: "url: https://t.example/mcp\noauth: {client_metadata_url: http://x.example/c.json}", err: "is not an https URL with a path"},
		{yaml: "url: https://t.example/mcp\noauth: {scope: [a]}", err: `unknown key "scope" (did you mean "scopes"?)`},
		{yaml: "url: https://t.example/mcp\ntype: sse\noauth: {}", err: "oauth needs streamable HTTP"},
		{yaml: "command: srv\noauth: {}", err: "oauth applies only to url servers"},
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(c.yaml), &n); err != nil {
			t.Fatal(err)
		}
		srv, err := ParseEntry("t.yaml", "s", n.Content[0])
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.yaml, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.err)
		case c.err == "" && strings.Join(srv.Warnings, "\n") != "" != (c.warn != ""):
			t.Errorf("%q: warnings %q, want %q", c.yaml, srv.Warnings, c.warn)
		case c.warn != "" && !strings.HasPrefix(srv.Warnings[0], c.warn):
			t.Errorf("%q: warning %q, want %q", c.yaml, srv.Warnings[0], c.warn)
		}
	}
}
