package oauth

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// refreshAhead is how long before its expiry an access token is renewed.
const refreshAhead = time.Minute

// stored hands a run the access token of a person's login, renewing it
// with its refresh token, and never asks a person: where a login is
// needed, the request fails with a *LoginRequiredError.
type stored struct {
	server   string
	endpoint string
	cfg      Config // secrets expanded
	store    *Store
	hc       *http.Client

	mu    sync.Mutex
	login *Login
	mtime time.Time // of the file login was read from
	// stale is an access token the server refused although it had not
	// expired (revoked): it is refreshed rather than sent again.
	stale string
	// dead is set when the refresh token was refused (invalid_grant): the
	// login stays expired until a new one is stored.
	dead bool
	// failed is when a refresh last failed otherwise (no answer, 5xx):
	// for failPause after it, requests fail at once rather than each
	// waiting for the token endpoint again.
	failed time.Time
}

// failPause is how long after a token endpoint failed requests fail at
// once (TokenError) instead of asking it again.
const failPause = 5 * time.Second

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
			return nil, &TokenError{Server: h.server, Msg: err.Error()}
		}
		h.login, h.mtime, h.dead, h.stale = l, fi.ModTime(), false, ""
	}
	return h.login, nil
}

// usable reports whether t can be sent for a while yet.
func (h *stored) usable(t *oauth2.Token) bool {
	return fresh(t) && t.AccessToken != h.stale
}

// fresh reports whether t does not expire within refreshAhead.
func fresh(t *oauth2.Token) bool {
	return t != nil && t.AccessToken != "" && (t.Expiry.IsZero() || time.Until(t.Expiry) > refreshAhead)
}

// token is the login's access token, renewed when it is about to expire
// or was refused; nil (no Authorization header: the server answers 401,
// and the request fails as needing a login) when there is none or it
// cannot be renewed.
func (h *stored) token(ctx context.Context) (*oauth2.Token, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, err := h.current()
	if err != nil || l == nil || l.Token == nil {
		return nil, err
	}
	if h.usable(l.Token) {
		return l.Token, nil
	}
	if !l.Refreshable() || h.dead {
		return nil, nil
	}
	if time.Since(h.failed) < failPause {
		return nil, &TokenError{Server: h.server, Msg: "refreshing the login failed moments ago"}
	}
	ctx, cancel := context.WithTimeout(ctx, TokenTimeout)
	defer cancel()
	var out *Login
	err = h.store.lockedCtx(ctx, h.endpoint, func() error {
		// Another process may have renewed it, or a person logged in
		// again or out, while this one waited.
		again, err := h.store.Load(h.endpoint)
		if err != nil || again == nil || again.Token == nil {
			return err
		}
		if h.usable(again.Token) {
			out = again
			return nil
		}
		if !again.Refreshable() {
			return nil
		}
		secret := again.ClientSecret
		if secret == "" && again.ClientID == h.cfg.ClientID {
			secret = h.cfg.ClientSecret
		}
		conf := &oauth2.Config{ClientID: again.ClientID, ClientSecret: secret,
			Endpoint: oauth2.Endpoint{TokenURL: again.TokenURL, AuthStyle: again.AuthStyle}}
		old := *again.Token
		old.AccessToken, old.Expiry = "", time.Unix(1, 0) // force the refresh
		tok, err := conf.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, h.hc), &old).Token()
		if err != nil {
			return err
		}
		again.Token = tok
		out = again
		// The refresh token may have been spent: the new one is used from
		// memory even if it cannot be kept.
		return h.store.Save(again)
	})
	if out != nil {
		h.login, h.stale, h.failed = out, "", time.Time{}
		if fi, serr := os.Stat(h.store.file(h.endpoint)); serr == nil {
			h.mtime = fi.ModTime()
		}
		if err == nil || h.usable(out.Token) {
			return out.Token, nil
		}
	}
	var re *oauth2.RetrieveError
	switch {
	case err == nil:
		return nil, nil // logged out meanwhile, or nothing to refresh with
	case errors.As(err, &re) && (re.ErrorCode == "invalid_grant" || re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client"):
		h.dead = true // refused: a person must log in again
		return nil, nil
	}
	h.failed = time.Now()
	return nil, &TokenError{Server: h.server, Msg: "refreshing the login: " + tokenError(err).Error()}
}

// refused: a 403 that is not about scopes is the server's answer; a 403
// insufficient_scope needs a person (the scopes are kept for the next
// login); a 401 is retried with a login stored since, or after a refresh,
// else needs a person.
func (h *stored) refused(ctx context.Context, ch challenge, sent string) (bool, error) {
	if ch.status == http.StatusForbidden {
		return false, h.final(ch)
	}
	h.mu.Lock()
	l, err := h.current()
	if err == nil && l != nil && l.Token != nil && sent != "" && l.Token.AccessToken == sent {
		h.stale = sent // refused before its time: refresh it
	}
	retry := err == nil && l != nil && l.Token != nil && (l.Token.AccessToken != sent && h.usable(l.Token) || l.Refreshable() && !h.dead)
	h.mu.Unlock()
	if err != nil {
		return false, err
	}
	if retry {
		return true, nil
	}
	return false, h.final(ch)
}

func (h *stored) final(ch challenge) error {
	switch {
	case ch.status == http.StatusForbidden && ch.err == "insufficient_scope":
		if err := h.store.Want(h.endpoint, ch.scopes); err != nil {
			return &TokenError{Server: h.server, Msg: err.Error()}
		}
		return &LoginRequiredError{Server: h.server, Why: WhyScopes, Scopes: ch.scopes}
	case ch.status == http.StatusForbidden:
		return &RefusedError{Server: h.server, Status: ch.status}
	}
	h.mu.Lock()
	l, _ := h.current()
	h.mu.Unlock()
	if l == nil || l.Token == nil {
		return &LoginRequiredError{Server: h.server, Why: WhyNone, Scopes: ch.scopes}
	}
	return &LoginRequiredError{Server: h.server, Why: WhyExpired, Scopes: ch.scopes}
}
