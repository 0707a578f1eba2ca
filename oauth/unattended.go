package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// maxStepUps bounds how often a server's 403 insufficient_scope makes
// the client ask for more scopes: a server that never grants them is not
// asked forever.
const maxStepUps = 3

// unattended gets tokens by the client credentials grant (SEP-1046): no
// person, a client registered beforehand that authenticates with its
// secret or a signed JWT. The sessions of one process with the same
// configuration share one (see unattendedShared).
type unattended struct {
	server   string
	endpoint string
	cfg      Config // secrets expanded
	hc       *http.Client
	*unattendedState
}

// unattendedState is what the sessions of one server entry share.
type unattendedState struct {
	mu      sync.Mutex
	found   *servers // discovery, once it was done
	tok     *oauth2.Token
	granted []string
	stepUps int
	failed  time.Time // see stored.failed
}

// unattendedShared holds the state of each configuration seen by this
// process, keyed by a digest of the whole configuration: an entry with
// another secret, key or scopes never gets another's token.
var unattendedShared sync.Map // [32]byte → *unattendedState

func newUnattended(server, endpoint string, cfg Config, hc *http.Client) *unattended {
	h := sha256.New()
	for _, v := range append([]string{Canonical(endpoint), cfg.ClientID, cfg.ClientSecret, cfg.PrivateKey, cfg.SigningAlg}, cfg.Scopes...) {
		fmt.Fprintf(h, "%d:%s", len(v), v)
	}
	var key [32]byte
	copy(key[:], h.Sum(nil))
	st, _ := unattendedShared.LoadOrStore(key, &unattendedState{})
	return &unattended{server: server, endpoint: endpoint, cfg: cfg, hc: hc, unattendedState: st.(*unattendedState)}
}

// token is the current token, a new one once it is about to expire; nil
// before the server first asked for one.
func (u *unattended) token(ctx context.Context) (*oauth2.Token, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tok == nil || fresh(u.tok) {
		return u.tok, nil
	}
	return u.fetchLocked(ctx, u.granted)
}

// fetchLocked gets a new token for scopes; u.mu is held.
func (u *unattended) fetchLocked(ctx context.Context, scopes []string) (*oauth2.Token, error) {
	if time.Since(u.failed) < failPause {
		return nil, &TokenError{Server: u.server, Msg: "the token endpoint failed moments ago"}
	}
	ctx, cancel := context.WithTimeout(ctx, TokenTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, u.hc)
	if u.found == nil {
		found, err := discover(ctx, u.endpoint, challenge{}, u.hc)
		if err != nil {
			return nil, &TokenError{Server: u.server, Msg: err.Error()}
		}
		u.found = found
	}
	tok, err := u.request(ctx, scopes)
	if err != nil {
		u.tok, u.found, u.failed = nil, nil, time.Now() // discover again next time: the configuration may have changed
		return nil, &TokenError{Server: u.server, Msg: "client credentials: " + tokenError(err).Error()}
	}
	u.tok, u.granted, u.failed = tok, scopes, time.Time{}
	return tok, nil
}

// refused: a 401 gets a token (discovery first, from the challenge); a
// 403 insufficient_scope a token with the scopes asked for too, at most
// maxStepUps times; any other 403 is the server's answer.
func (u *unattended) refused(ctx context.Context, ch challenge, sent string) (bool, error) {
	if ch.status == http.StatusForbidden && ch.err != "insufficient_scope" {
		return false, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tok != nil && u.tok.AccessToken != sent && fresh(u.tok) && ch.status == http.StatusUnauthorized {
		return true, nil // another session got a new one meanwhile
	}
	if ch.status == http.StatusForbidden {
		u.stepUps++
		if u.stepUps > maxStepUps {
			return false, &RefusedError{Server: u.server, Status: ch.status}
		}
	}
	if u.found == nil || ch.metadata != "" && u.found.resourceURL != ch.metadata {
		found, err := discover(ctx, u.endpoint, ch, u.hc)
		if err != nil {
			return false, &TokenError{Server: u.server, Msg: err.Error()}
		}
		u.found = found
	}
	scopes := ch.scopes
	if len(scopes) == 0 {
		scopes = u.found.resource.ScopesSupported
	}
	if _, err := u.fetchLocked(ctx, union(union(u.granted, scopes), u.cfg.Scopes)); err != nil {
		return false, err
	}
	return true, nil
}

func (u *unattended) final(ch challenge) error {
	return &RefusedError{Server: u.server, Status: ch.status}
}

// request asks the token endpoint for a token.
func (u *unattended) request(ctx context.Context, scopes []string) (*oauth2.Token, error) {
	found := u.found
	cc := &clientcredentials.Config{
		ClientID:       u.cfg.ClientID,
		TokenURL:       found.auth.TokenEndpoint,
		Scopes:         scopes,
		EndpointParams: map[string][]string{"resource": {found.resourceOf(u.endpoint)}},
	}
	if u.cfg.PrivateKey == "" {
		cc.ClientSecret = u.cfg.ClientSecret
		cc.AuthStyle = secretStyle(found.auth.TokenEndpointAuthMethodsSupported)
		return cc.Token(ctx)
	}
	key, alg, err := signingKey(u.cfg.PrivateKey, u.cfg.SigningAlg)
	if err != nil {
		return nil, fmt.Errorf("oauth private_key: %w", err)
	}
	// A fresh assertion for every token request: it expires soon.
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Issuer: u.cfg.ClientID, Subject: u.cfg.ClientID, Audience: jwt.ClaimStrings{found.auth.Issuer},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)), ID: rand.Text(),
	}
	signed, err := jwt.NewWithClaims(alg, claims).SignedString(key)
	if err != nil {
		return nil, err
	}
	cc.AuthStyle = oauth2.AuthStyleInParams
	cc.EndpointParams["client_assertion_type"] = []string{"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}
	cc.EndpointParams["client_assertion"] = []string{signed}
	return cc.Token(ctx)
}

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
			// The value may be a key that is not PEM: it is not shown.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, nil, fmt.Errorf("neither a PEM private key nor a file that can be read (%v)", err)
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
