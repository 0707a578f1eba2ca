// Package oauthtest is an MCP server that asks for OAuth tokens, with its
// own authorization server, on loopback: for tests of logins, refreshes
// and the client credentials grant. The authorization server logs every
// person in at once (its authorization endpoint redirects straight back).
package oauthtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"

	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Person is whom the authorization server logs in: its ID tokens say so.
const Person = "ada@tracker.example"

// Server is the MCP server (at URL) and its authorization server.
type Server struct {
	URL string // the MCP endpoint, .../mcp
	// ClientID and ClientSecret are a client registered beforehand, for
	// the client credentials grant and pre-registration.
	ClientID, ClientSecret string
	// Scopes the MCP server requires of every request (see SetScopes).
	Scopes []string
	// Lifetime of the access tokens issued.
	Lifetime time.Duration

	base string
	mu   sync.Mutex
	// tokens issued and still good, with their scopes.
	tokens  map[string][]string
	refresh map[string][]string // refresh token → scopes
	codes   map[string]code
	// JWTKey, when set, is the public key a client_assertion (private_key_jwt)
	// must be signed with; its iss and sub must be ClientID, its audience
	// the issuer.
	JWTKey *ecdsa.PublicKey
	// RefuseRefresh makes the token endpoint refuse refresh tokens.
	RefuseRefresh atomic.Bool
	// Counts.
	Authorizations, Refreshes, ClientCredentials, Calls atomic.Int64
	// LastTokenAuth is how the last token request authenticated its
	// client: "basic", "post", "jwt" or "none".
	LastTokenAuth atomic.Value
}

type code struct {
	challenge string
	scopes    []string
	redirect  string
}

// New starts the servers; they stop when the test ends.
func New(t testing.TB) *Server {
	s := &Server{ClientID: "mcpflow-ci", ClientSecret: "s3cret-" + rand.Text(), Lifetime: time.Hour,
		tokens: map[string][]string{}, refresh: map[string][]string{}, codes: map[string]code{}}
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	s.base, s.URL = hs.URL, hs.URL+"/mcp"

	m := mcp.NewServer(&mcp.Implementation{Name: "oauthtest", Version: "1"}, nil)
	mcp.AddTool(m, &mcp.Tool{Name: "count", Description: "counts calls"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct {
		N int64 `json:"n"`
	}, error) {
		n := s.Calls.Add(1)
		return nil, struct {
			N int64 `json:"n"`
		}{n}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m }, nil)
	prm := s.base + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/mcp", s.requireToken(prm, h))
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		scopes := slices.Clone(s.Scopes)
		s.mu.Unlock()
		writeJSON(w, &oauthex.ProtectedResourceMetadata{Resource: s.URL, AuthorizationServers: []string{s.base}, ScopesSupported: scopes})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, &oauthex.AuthServerMeta{Issuer: s.base, AuthorizationEndpoint: s.base + "/authorize", TokenEndpoint: s.base + "/token",
			RegistrationEndpoint: s.base + "/register", ResponseTypesSupported: []string{"code"}, CodeChallengeMethodsSupported: []string{"S256"},
			GrantTypesSupported: []string{"authorization_code", "refresh_token", "client_credentials"}, TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "none"}})
	})
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("/token", s.token)
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		var meta oauthex.ClientRegistrationMetadata
		json.NewDecoder(r.Body).Decode(&meta)
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, map[string]any{"client_id": "registered-" + rand.Text(), "redirect_uris": meta.RedirectURIs, "token_endpoint_auth_method": "none"})
	})
	return s
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// requireToken lets through requests that carry a token it issued with
// the scopes required, and answers the others as the MCP specification
// says: 401 with the resource metadata's URL (and the scopes), or 403
// insufficient_scope.
func (s *Server) requireToken(prm string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		granted, ok := s.tokens[tok]
		need := slices.Clone(s.Scopes)
		s.mu.Unlock()
		challenge := fmt.Sprintf("Bearer resource_metadata=%q", prm)
		if len(need) > 0 {
			challenge += fmt.Sprintf(", scope=%q", strings.Join(need, " "))
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "no valid token", http.StatusUnauthorized)
			return
		}
		for _, n := range need {
			if !slices.Contains(granted, n) {
				w.Header().Set("WWW-Authenticate", challenge+`, error="insufficient_scope"`)
				http.Error(w, "insufficient scope", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// SetScopes changes the scopes the MCP server requires.
func (s *Server) SetScopes(scopes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Scopes = scopes
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") == "" {
		http.Error(w, "PKCE S256 and resource are required", http.StatusBadRequest)
		return
	}
	s.Authorizations.Add(1)
	c := rand.Text()
	s.mu.Lock()
	s.codes[c] = code{challenge: q.Get("code_challenge"), scopes: strings.Fields(q.Get("scope")), redirect: q.Get("redirect_uri")}
	s.mu.Unlock()
	to, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	v := to.Query()
	v.Set("code", c)
	v.Set("state", q.Get("state"))
	to.RawQuery = v.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	how := "none"
	if id, secret, ok := r.BasicAuth(); ok {
		if id != s.ClientID || secret != s.ClientSecret {
			tokenError(w, http.StatusUnauthorized, "invalid_client")
			return
		}
		how = "basic"
	} else if r.PostForm.Get("client_secret") != "" {
		how = "post"
	} else if a := r.PostForm.Get("client_assertion"); a != "" {
		var claims jwt.RegisteredClaims
		_, err := jwt.ParseWithClaims(a, &claims, func(*jwt.Token) (any, error) { return s.JWTKey, nil },
			jwt.WithValidMethods([]string{"ES256"}), jwt.WithAudience(s.base), jwt.WithIssuer(s.ClientID), jwt.WithSubject(s.ClientID))
		if s.JWTKey == nil || err != nil || r.PostForm.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
			tokenError(w, http.StatusUnauthorized, "invalid_client")
			return
		}
		how = "jwt"
	}
	s.LastTokenAuth.Store(how)
	var scopes []string
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		s.mu.Lock()
		c, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		s.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		scopes = c.scopes
	case "refresh_token":
		s.mu.Lock()
		sc, ok := s.refresh[r.PostForm.Get("refresh_token")]
		delete(s.refresh, r.PostForm.Get("refresh_token")) // rotated
		s.mu.Unlock()
		if !ok || s.RefuseRefresh.Load() {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		s.Refreshes.Add(1)
		scopes = sc
	case "client_credentials":
		if how == "none" {
			tokenError(w, http.StatusUnauthorized, "invalid_client")
			return
		}
		s.ClientCredentials.Add(1)
		scopes = strings.Fields(r.PostForm.Get("scope"))
	default:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	access, refresh := "at-"+rand.Text(), "rt-"+rand.Text()
	s.mu.Lock()
	s.tokens[access] = scopes
	s.refresh[refresh] = scopes
	s.mu.Unlock()
	body := map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": int(s.Lifetime.Seconds()),
		"refresh_token": refresh, "scope": strings.Join(scopes, " ")}
	if r.PostForm.Get("grant_type") == "authorization_code" {
		id, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": s.base, "sub": "user-1", "email": Person}).SignedString([]byte(rand.Text()))
		body["id_token"] = id
	}
	writeJSON(w, body)
}

func tokenError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":%q}`, code)
}

// Revoke makes every access token issued so far invalid.
func (s *Server) Revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

// Issued reports whether tok is an access token the server issued and
// still takes.
func (s *Server) Issued(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tokens[tok]
	return ok
}

// Browse is what a person's browser does with the authorization URL
// here: follow the redirects, to the login's loopback listener.
func Browse(authURL string) error {
	resp, err := http.Get(authURL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the redirect answered %s", resp.Status)
	}
	return nil
}
