package upstream

// Reproductions from the review of issue 37 (OAuth): each states the
// behaviour that holds, and failed before the fixes.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/oauth"
	"github.com/mcpflow/mcpflow/oauth/oauthtest"
	"github.com/mcpflow/mcpflow/replay"
)

// tokenHook is a RoundTripper that lets a test intercept the requests to
// the authorization server's token endpoint.
type tokenHook struct {
	mu   sync.Mutex
	hook func(r *http.Request) (*http.Response, bool)
}

func (h *tokenHook) set(f func(r *http.Request) (*http.Response, bool)) {
	h.mu.Lock()
	h.hook = f
	h.mu.Unlock()
}

func (h *tokenHook) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	f := h.hook
	h.mu.Unlock()
	if f != nil && r.URL.Path == "/token" {
		if resp, ok := f(r); ok {
			return resp, nil
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func hooked(opts *Options) *tokenHook {
	h := &tokenHook{}
	opts.HTTPClient = &http.Client{Transport: h}
	return h
}

func answer(r *http.Request, status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Request: r,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}
}

func expireSoon(t *testing.T, store *oauth.Store, url string) {
	t.Helper()
	l, err := store.Load(url)
	if err != nil || l == nil {
		t.Fatalf("load: %v %v", l, err)
	}
	l.Token.Expiry = time.Now().Add(10 * time.Second)
	if err := store.Save(l); err != nil {
		t.Fatal(err)
	}
}

// A transient failure of the token endpoint (503) during a refresh is not
// a refused refresh token: the run should not be told that a person must
// log in again. stored.Token marks the login dead on any
// *oauth2.RetrieveError, and x/oauth2 returns one for every non-2xx status.
func TestReviewTransientRefreshFailureIsNotALogin(t *testing.T) {
	as := oauthtest.New(t)
	srv, opts, store := loginServer(t, as, &oauth.Config{})
	if _, _, err := LogIn(t.Context(), srv, opts, oauthtest.Browse); err != nil {
		t.Fatal(err)
	}
	expireSoon(t, store, as.URL)
	h := hooked(opts)
	var once atomic.Bool
	h.set(func(r *http.Request) (*http.Response, bool) {
		if once.CompareAndSwap(false, true) {
			return answer(r, http.StatusServiceUnavailable, `{"error":"temporarily_unavailable"}`), true
		}
		return nil, false
	})
	s, err := Connect(t.Context(), srv, opts)
	if err == nil {
		s.Close()
	}
	var le *oauth.LoginRequiredError
	if errors.As(err, &le) {
		t.Fatalf("a 503 from the token endpoint during a refresh: %v; want a retryable error, not a demand for a new login (the refresh token is still good)", err)
	}
}

// An access token the resource server no longer takes (revoked, or an
// expiry the client does not know: no expires_in) while the stored refresh
// token is still good: the handler should refresh and retry the refused
// (401, so not run) request rather than demand a person.
func TestReviewRevokedAccessTokenIsRefreshedNotALogin(t *testing.T) {
	as := oauthtest.New(t)
	srv, opts, _ := loginServer(t, as, &oauth.Config{})
	if _, _, err := LogIn(t.Context(), srv, opts, oauthtest.Browse); err != nil {
		t.Fatal(err)
	}
	as.Revoke() // access tokens only; refresh tokens stay good
	s, err := Connect(t.Context(), srv, opts)
	if err != nil {
		t.Fatalf("connect with a revoked access token and a good refresh token: %v; want a refresh", err)
	}
	s.Close()
}

// A refresh that hangs (token endpoint never answers) must not outlive
// the caller's deadline: stored.Token refreshes with context.Background
// and http.DefaultClient (no timeout), while holding stored.mu, the
// go-sdk connection's mutex and the store's flock.
func TestReviewHungRefreshIgnoresDeadline(t *testing.T) {
	as := oauthtest.New(t)
	srv, opts, store := loginServer(t, as, &oauth.Config{})
	if _, _, err := LogIn(t.Context(), srv, opts, oauthtest.Browse); err != nil {
		t.Fatal(err)
	}
	expireSoon(t, store, as.URL)
	release := make(chan struct{})
	defer close(release)
	h := hooked(opts)
	h.set(func(r *http.Request) (*http.Response, bool) {
		select { // a token endpoint that never answers; the client gives up
		case <-release:
		case <-r.Context().Done():
		}
		return answer(r, http.StatusServiceUnavailable, `{}`), true
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s, err := Connect(ctx, srv, opts)
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("connect with a 1s deadline still blocked after 5s in a token refresh")
	}
}

// client_credentials tokens are shared by (endpoint, client_id) only: an
// entry with the same URL and client_id but a wrong secret (or other
// scopes) is handed the token another entry's credentials got.
func TestReviewClientCredentialsCacheIgnoresTheSecret(t *testing.T) {
	as := oauthtest.New(t)
	good, opts, _ := loginServer(t, as, &oauth.Config{Grant: oauth.GrantClientCredentials, ClientID: as.ClientID, ClientSecret: as.ClientSecret})
	s, err := Connect(t.Context(), good, opts)
	if err != nil {
		t.Fatal(err)
	}
	callCount(t, s)
	s.Close()

	bad := &Server{Name: "intruder", URL: as.URL, OAuth: &oauth.Config{Grant: oauth.GrantClientCredentials, ClientID: as.ClientID, ClientSecret: "not-the-secret", Scopes: []string{"admin"}}}
	calls := as.Calls.Load()
	s, err = Connect(t.Context(), bad, opts)
	if err == nil {
		_, err = s.Call(t.Context(), "count", json.RawMessage(`{}`), nil, nil)
		s.Close()
	}
	if err == nil || as.Calls.Load() != calls {
		t.Fatalf("an entry with a wrong client_secret called the server with another entry's token (err %v)", err)
	}
}

// A client_credentials token that must be renewed mid-session and is
// refused: the call never left (the token source failed before the POST),
// yet it is classified ClassLost (may have run), and the error carries the
// token endpoint's whole response body (tokenError strips it only in
// Authorize).
func TestReviewUnattendedRenewalFailureIsLostAndLeaksBody(t *testing.T) {
	as := oauthtest.New(t)
	as.Lifetime = 30 * time.Second // under ReuseTokenSourceWithExpiry's minute: renewed each request
	srv, opts, _ := loginServer(t, as, &oauth.Config{Grant: oauth.GrantClientCredentials, ClientID: as.ClientID, ClientSecret: as.ClientSecret})
	h := hooked(opts)
	s, err := Connect(t.Context(), srv, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h.set(func(r *http.Request) (*http.Response, bool) {
		return answer(r, http.StatusUnauthorized, `{"error":"invalid_client","error_description":"secret SENSITIVE-ECHO revoked"}`), true
	})
	calls := as.Calls.Load()
	_, err = s.Call(t.Context(), "count", json.RawMessage(`{}`), nil, nil)
	if err == nil {
		t.Fatal("call succeeded")
	}
	if as.Calls.Load() != calls {
		t.Fatal("the call reached the server")
	}
	var problems []string
	if c := Classify(err); c != replay.ClassNotDelivered {
		problems = append(problems, "class "+c.String()+" for a call that never left, want not delivered")
	}
	if strings.Contains(err.Error(), "SENSITIVE-ECHO") {
		problems = append(problems, "the error quotes the token endpoint's body: "+err.Error())
	}
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "; "))
	}
}

// A private_key that is not PEM (say a base64 key from ${VAR}) is taken for
// a file name; the error, which is journaled and printed, then holds the
// key itself.
func TestReviewPrivateKeyInErrorMessage(t *testing.T) {
	as := oauthtest.New(t)
	const key = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgSECRETKEYMATERIAL"
	srv, opts, _ := loginServer(t, as, &oauth.Config{Grant: oauth.GrantClientCredentials, ClientID: as.ClientID, PrivateKey: "${KEY}"})
	opts.LookupEnv = func(k string) (string, bool) { return key, k == "KEY" }
	_, err := Connect(t.Context(), srv, opts)
	if err == nil {
		t.Fatal("connect succeeded")
	}
	if strings.Contains(err.Error(), "SECRETKEYMATERIAL") {
		t.Fatalf("the error holds the private key: %v", err)
	}
}

// logout while another process (or session) is refreshing: the refresh,
// holding the lock, saves the login again after Remove, which does not
// take the lock. The person logged out, and the tokens are back on disk.
func TestReviewLogoutUndoneByConcurrentRefresh(t *testing.T) {
	as := oauthtest.New(t)
	srv, opts, store := loginServer(t, as, &oauth.Config{})
	if _, _, err := LogIn(t.Context(), srv, opts, oauthtest.Browse); err != nil {
		t.Fatal(err)
	}
	expireSoon(t, store, as.URL)
	entered, release := make(chan struct{}), make(chan struct{})
	h := hooked(opts)
	var once atomic.Bool
	h.set(func(r *http.Request) (*http.Response, bool) {
		if once.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
		return nil, false
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if s, err := Connect(t.Context(), srv, opts); err == nil {
			s.Close()
		}
	}()
	<-entered
	type out struct {
		had bool
		err error
	}
	logout := make(chan out, 1)
	go func() {
		had, err := LogOut(srv, opts) // waits for the refresh under way
		logout <- out{had, err}
	}()
	time.Sleep(50 * time.Millisecond)
	close(release)
	<-done
	if o := <-logout; !o.had || o.err != nil {
		t.Fatalf("logout: %v %v", o.had, o.err)
	}
	if l, _ := StoredLogin(srv, opts); l != nil {
		t.Fatalf("after logout, a concurrent refresh stored the login again (refresh token %q...)", l.Token.RefreshToken[:5])
	}
}

// upstream's doc says each journaled attempt puts exactly one tools/call
// on the wire and that go-sdk never re-sends a POST. With an OAuthHandler
// it does: a 403 whose challenge is not insufficient_scope makes
// Authorize return nil, and go-sdk posts the same tools/call again, which
// CallsSent does not see.
func TestReviewForbiddenCallIsPostedTwice(t *testing.T) {
	as := oauthtest.New(t)
	srv, opts, _ := loginServer(t, as, &oauth.Config{Grant: oauth.GrantClientCredentials, ClientID: as.ClientID, ClientSecret: as.ClientSecret})
	var posts atomic.Int64
	opts.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && r.URL.Path == "/mcp" && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			if strings.Contains(string(b), `"tools/call"`) {
				posts.Add(1)
				resp := answer(r, http.StatusForbidden, `forbidden by policy`)
				resp.Header.Set("Content-Type", "text/plain")
				return resp, nil
			}
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	s, err := Connect(t.Context(), srv, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Call(t.Context(), "count", json.RawMessage(`{}`), nil, nil)
	if posts.Load() != 1 {
		t.Fatalf("one Call put %d tools/call POSTs on the wire (CallsSent says %d); err %v", posts.Load(), s.CallsSent(), err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The client secret is rotated and the configuration updated: new
// sessions of this process keep the token source built with the old
// secret (the cache is keyed by endpoint and client_id), whose renewal is
// refused before any request leaves, so no 401 ever reaches Authorize and
// the process never recovers.
func TestReviewRotatedSecretNeverTakesEffect(t *testing.T) {
	as := oauthtest.New(t)
	as.Lifetime = 30 * time.Second // renewed at every request
	old := as.ClientSecret
	srv, opts, _ := loginServer(t, as, &oauth.Config{Grant: oauth.GrantClientCredentials, ClientID: as.ClientID, ClientSecret: old})
	s, err := Connect(t.Context(), srv, opts)
	if err != nil {
		t.Fatal(err)
	}
	callCount(t, s)
	s.Close()

	as.ClientSecret = "rotated-" + old // the AS now takes only the new one (test-only write; no session is active)
	rotated := &Server{Name: "tracker", URL: as.URL, OAuth: &oauth.Config{Grant: oauth.GrantClientCredentials, ClientID: as.ClientID, ClientSecret: as.ClientSecret}}
	s, err = Connect(t.Context(), rotated, opts)
	if err == nil {
		_, err = s.Call(t.Context(), "count", json.RawMessage(`{}`), nil, nil)
		s.Close()
	}
	if err != nil {
		t.Fatalf("after the secret was rotated and configured, a new session still fails: %v", err)
	}
}
