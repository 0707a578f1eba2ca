package oauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"
)

// refreshAhead is how long before its expiry an access token is renewed.
const refreshAhead = time.Minute

// stored hands runs the access token of a person's login, renewing it
// with its refresh token, and never asks a person: where a login is
// needed, Authorize fails with a *LoginRequiredError. It implements
// go-sdk's auth.OAuthHandler, and is its own token source.
type stored struct {
	server   string
	endpoint string
	cfg      Config // secrets expanded
	store    *Store
	hc       *http.Client

	mu    sync.Mutex
	login *Login
	mtime time.Time // of the file login was read from
	// dead is set when the refresh token was refused: the login stays
	// expired until a new one is stored.
	dead bool
}

var _ auth.OAuthHandler = (*stored)(nil)

func (h *stored) TokenSource(context.Context) (oauth2.TokenSource, error) { return h, nil }

// current is the stored login, read again when its file changed.
func (h *stored) current() (*Login, error) {
	fi, err := os.Stat(h.store.file(h.endpoint))
	if err != nil {
		h.login, h.mtime = nil, time.Time{}
		return nil, nil
	}
	if h.login == nil || !fi.ModTime().Equal(h.mtime) {
		l, err := h.store.Load(h.endpoint)
		if err != nil {
			return nil, err
		}
		h.login, h.mtime, h.dead = l, fi.ModTime(), false
	}
	return h.login, nil
}

// Token is the login's access token, renewed when it is about to expire;
// nil (no Authorization header: the server answers 401, and Authorize
// says a login is needed) when there is none or it cannot be renewed.
func (h *stored) Token() (*oauth2.Token, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, err := h.current()
	if err != nil || l == nil || l.Token == nil {
		return nil, err
	}
	if fresh(l.Token) {
		return l.Token, nil
	}
	if !l.Refreshable() || h.dead {
		return nil, nil
	}
	var refreshed *oauth2.Token
	err = h.store.locked(h.endpoint, func() error {
		// Another process may have renewed it while this one waited.
		again, err := h.store.Load(h.endpoint)
		if err != nil || again == nil {
			return err
		}
		if fresh(again.Token) {
			refreshed, l = again.Token, again
			return nil
		}
		secret := again.ClientSecret
		if secret == "" && again.ClientID == h.cfg.ClientID {
			secret = h.cfg.ClientSecret
		}
		conf := &oauth2.Config{ClientID: again.ClientID, ClientSecret: secret,
			Endpoint: oauth2.Endpoint{TokenURL: again.TokenURL, AuthStyle: again.AuthStyle}}
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.hc)
		old := *again.Token
		old.AccessToken, old.Expiry = "", time.Unix(1, 0) // force the refresh
		tok, err := conf.TokenSource(ctx, &old).Token()
		if err != nil {
			return err
		}
		again.Token = tok
		if err := h.store.Save(again); err != nil {
			return err
		}
		refreshed, l = tok, again
		return nil
	})
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		h.dead = true // refused: a person must log in again
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h.login = l
	if fi, serr := os.Stat(h.store.file(h.endpoint)); serr == nil {
		h.mtime = fi.ModTime()
	}
	return refreshed, nil
}

// fresh reports whether t can be used for a while yet.
func fresh(t *oauth2.Token) bool {
	return t != nil && t.AccessToken != "" && (t.Expiry.IsZero() || time.Until(t.Expiry) > refreshAhead)
}

// Authorize is called by go-sdk's transport when the server refused a
// request with 401 or 403. A 403 that is not about scopes is left to the
// retry; a login stored since the refused request was sent is retried
// with; anything else needs a person.
func (h *stored) Authorize(_ context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	defer io.Copy(io.Discard, resp.Body)
	ch := readChallenge(resp)
	if ch.status == http.StatusForbidden && ch.err != "insufficient_scope" {
		return nil
	}
	sent := strings.TrimSpace(strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "))
	h.mu.Lock()
	l, err := h.current()
	dead := h.dead
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if ch.status == http.StatusForbidden {
		if err := h.store.Want(h.endpoint, ch.scopes); err != nil {
			return err
		}
		return &LoginRequiredError{Server: h.server, Why: WhyScopes, Scopes: ch.scopes}
	}
	switch {
	case l == nil || l.Token == nil:
		return &LoginRequiredError{Server: h.server, Why: WhyNone, Scopes: ch.scopes}
	case l.Token.AccessToken != sent && fresh(l.Token) && !dead:
		return nil // a login newer than the request: try it
	}
	return &LoginRequiredError{Server: h.server, Why: WhyExpired, Scopes: ch.scopes}
}
