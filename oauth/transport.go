package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"
)

// TokenTimeout bounds each request to an authorization server (discovery,
// a token, a refresh), and the wait for another process's refresh.
const TokenTimeout = 30 * time.Second

// TokenError says that no access token could be had for a request, which
// was therefore not sent: the token endpoint refused or did not answer,
// discovery failed, the login file could not be read. Its text holds no
// token, no secret and nothing of what the authorization server wrote
// beyond its error code.
type TokenError struct {
	Server string
	Msg    string
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("server %q: no access token: %s", e.Server, e.Msg)
}

// RefusedError says that the server refused a request with 401 or 403
// after the token was renewed, or with a 403 that asks for no scope: the
// request was not acted on.
type RefusedError struct {
	Server string
	Status int
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("server %q refused the request: %d %s", e.Server, e.Status, http.StatusText(e.Status))
}

// source is where a server's tokens come from: a person's stored login, or
// the client credentials grant.
type source interface {
	// token is the access token to send, nil to send none.
	token(ctx context.Context) (*oauth2.Token, error)
	// refused is told that the server refused a request sent with the
	// token sent ("" none) with ch; it says whether to send the request
	// again (once) with a new token, or why not.
	refused(ctx context.Context, ch challenge, sent string) (again bool, err error)
	// final is told that the request sent again was refused too.
	final(ch challenge) error
}

// authTransport adds the server's access token to every request to its
// host, and answers a 401 or 403 itself: it renews the token (refresh,
// the client credentials grant, a login stored meanwhile) and sends the
// request once more, or fails it with an error that says it was not sent
// on (LoginRequiredError, RefusedError, TokenError). go-sdk then sees
// either the answer to the request it made or an error from the HTTP
// client, which it reports as not delivered; no request is put on the
// wire twice except after a 401 or 403, which the server did not act on.
type authTransport struct {
	next   http.RoundTripper
	host   string
	server string
	src    source
}

// Transport returns next with the server's authorization: the Authorization
// header on every request to endpoint's host, renewed as needed. cfg's
// secrets are expanded; store keeps a person's logins; tokenClient reaches
// the authorization server (nil: a client of its own).
func Transport(next http.RoundTripper, server, endpoint string, cfg Config, store *Store, tokenClient *http.Client) http.RoundTripper {
	tc := &http.Client{Timeout: TokenTimeout}
	if tokenClient != nil {
		c := *tokenClient
		c.Timeout = TokenTimeout
		tc = &c
	}
	t := &authTransport{next: next, host: hostOf(endpoint), server: server}
	if cfg.GrantType() == GrantClientCredentials {
		t.src = newUnattended(server, endpoint, cfg, tc)
	} else {
		t.src = &stored{server: server, endpoint: endpoint, cfg: cfg, store: store, hc: tc}
	}
	return t
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host {
		return t.next.RoundTrip(req)
	}
	ctx := req.Context()
	tok, err := t.src.token(ctx)
	if err != nil {
		return nil, err
	}
	sent := ""
	if tok != nil {
		sent = tok.AccessToken
	}
	resp, err := t.next.RoundTrip(authorized(req, sent))
	if err != nil || !refusal(resp.StatusCode) {
		return resp, err
	}
	ch := readChallenge(resp)
	discard(resp)
	again, err := t.src.refused(ctx, ch, sent)
	if err != nil {
		return nil, err
	}
	if !again {
		return nil, &RefusedError{Server: t.server, Status: ch.status}
	}
	retry, err := rewound(req)
	if err != nil {
		return nil, err
	}
	if tok, err = t.src.token(ctx); err != nil {
		return nil, err
	}
	sent = ""
	if tok != nil {
		sent = tok.AccessToken
	}
	resp, err = t.next.RoundTrip(authorized(retry, sent))
	if err != nil || !refusal(resp.StatusCode) {
		return resp, err
	}
	ch = readChallenge(resp)
	discard(resp)
	return nil, t.src.final(ch)
}

func refusal(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

func discard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// authorized is req with the bearer token, or without one when tok is "".
func authorized(req *http.Request, tok string) *http.Request {
	r := req.Clone(req.Context())
	if tok == "" {
		r.Header.Del("Authorization")
	} else {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return r
}

// rewound is req with its body from the start, to send it again.
func rewound(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return r, nil
	}
	if req.GetBody == nil {
		return nil, errors.New("the request cannot be sent again (its body cannot be read twice)")
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r.Body = body
	return r, nil
}

func hostOf(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return u.Host
}
