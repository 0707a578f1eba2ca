package oauth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// maxStepUps bounds how often one session asks for more scopes after a
// 403 insufficient_scope: a server that never grants them is not asked
// forever.
const maxStepUps = 3

// unattended gets tokens by the client credentials grant (SEP-1046): no
// person, a client registered beforehand that authenticates with its
// secret or a signed JWT. It implements go-sdk's auth.OAuthHandler.
type unattended struct {
	server   string
	endpoint string
	cfg      Config // secrets expanded
	hc       *http.Client

	// share hands a new token source to the sessions connected later.
	share func(ts oauth2.TokenSource, granted []string)

	mu      sync.Mutex
	ts      oauth2.TokenSource
	granted []string
	stepUps int
}

var _ auth.OAuthHandler = (*unattended)(nil)

func (h *unattended) TokenSource(context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ts, nil
}

func (h *unattended) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	defer io.Copy(io.Discard, resp.Body)
	ch := readChallenge(resp)
	if ch.status == http.StatusForbidden && ch.err != "insufficient_scope" {
		return nil // not about the token: the retry reports it
	}
	h.mu.Lock()
	if ch.status == http.StatusForbidden {
		h.stepUps++
		if h.stepUps > maxStepUps {
			h.mu.Unlock()
			return fmt.Errorf("server %q refused the scopes it was granted %d times (asks for %v): giving up", h.server, maxStepUps, ch.scopes)
		}
	}
	granted := h.granted
	h.mu.Unlock()
	found, err := discover(ctx, h.endpoint, ch, h.hc)
	if err != nil {
		return fmt.Errorf("server %q: %w", h.server, err)
	}
	scopes := ch.scopes
	if len(scopes) == 0 {
		scopes = found.resource.ScopesSupported
	}
	scopes = union(union(granted, scopes), h.cfg.Scopes)
	src, err := h.source(found, scopes)
	if err != nil {
		return err
	}
	ts := oauth2.ReuseTokenSourceWithExpiry(nil, src, time.Minute)
	if _, err := ts.Token(); err != nil {
		return fmt.Errorf("server %q: client credentials refused: %w", h.server, tokenError(err))
	}
	h.mu.Lock()
	h.ts, h.granted = ts, scopes
	h.mu.Unlock()
	if h.share != nil {
		h.share(ts, scopes)
	}
	return nil
}

// source is a token source that asks the token endpoint each time.
func (h *unattended) source(found *servers, scopes []string) (oauth2.TokenSource, error) {
	cc := &clientcredentials.Config{
		ClientID:       h.cfg.ClientID,
		TokenURL:       found.auth.TokenEndpoint,
		Scopes:         scopes,
		EndpointParams: map[string][]string{"resource": {found.resourceOf(h.endpoint)}},
	}
	// Token requests outlive the request that led to them.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.hc)
	if h.cfg.PrivateKey == "" {
		cc.ClientSecret = h.cfg.ClientSecret
		cc.AuthStyle = secretStyle(found.auth.TokenEndpointAuthMethodsSupported)
		return cc.TokenSource(ctx), nil
	}
	key, alg, err := signingKey(h.cfg.PrivateKey, h.cfg.SigningAlg)
	if err != nil {
		return nil, fmt.Errorf("server %q: oauth private_key: %w", h.server, err)
	}
	audience := found.auth.Issuer
	cc.AuthStyle = oauth2.AuthStyleInParams
	return tokenFunc(func() (*oauth2.Token, error) {
		// A fresh assertion for every token request: it expires soon.
		now := time.Now()
		claims := jwt.RegisteredClaims{
			Issuer: h.cfg.ClientID, Subject: h.cfg.ClientID, Audience: jwt.ClaimStrings{audience},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)), ID: rand.Text(),
		}
		signed, err := jwt.NewWithClaims(alg, claims).SignedString(key)
		if err != nil {
			return nil, err
		}
		c := *cc
		c.EndpointParams = map[string][]string{
			"resource":              cc.EndpointParams["resource"],
			"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
			"client_assertion":      {signed},
		}
		return c.Token(ctx)
	}), nil
}

type tokenFunc func() (*oauth2.Token, error)

func (f tokenFunc) Token() (*oauth2.Token, error) { return f() }

// secretStyle is how the client secret goes to the token endpoint:
// client_secret_basic unless the server supports only client_secret_post.
func secretStyle(supported []string) oauth2.AuthStyle {
	if !slices.Contains(supported, "client_secret_basic") && slices.Contains(supported, "client_secret_post") {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}

// signingKey reads a PEM private key, given or in a file, and the JWS
// algorithm it signs with.
func signingKey(pemOrPath, alg string) (any, jwt.SigningMethod, error) {
	b := []byte(pemOrPath)
	if isPath(pemOrPath) {
		var err error
		if b, err = os.ReadFile(pemOrPath); err != nil {
			return nil, nil, err
		}
	}
	if ec, err := jwt.ParseECPrivateKeyFromPEM(b); err == nil {
		if alg == "" {
			alg = map[int]string{256: "ES256", 384: "ES384", 521: "ES512"}[ec.Curve.Params().BitSize]
		}
		m := jwt.GetSigningMethod(alg)
		if _, ok := m.(*jwt.SigningMethodECDSA); !ok {
			return nil, nil, fmt.Errorf("an EC key cannot sign %s (expected ES256, ES384 or ES512)", alg)
		}
		return ec, m, nil
	}
	rsaKey, err := jwt.ParseRSAPrivateKeyFromPEM(b)
	if err != nil {
		return nil, nil, errors.New("not a PEM EC or RSA private key")
	}
	if alg == "" {
		alg = "RS256"
	}
	m := jwt.GetSigningMethod(alg)
	switch m.(type) {
	case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS:
	default:
		return nil, nil, fmt.Errorf("an RSA key cannot sign %s (expected RS256, RS384, RS512, PS256, PS384 or PS512)", alg)
	}
	return rsaKey, m, nil
}

// tokenError is a token endpoint's refusal without its description, which
// may quote what was sent: the error code and the HTTP status only.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if code == "" {
			code = "no error code"
		}
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Errorf("the token endpoint answered %d (%s)", status, code)
	}
	return err
}
