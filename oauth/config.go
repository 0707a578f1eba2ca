// Package oauth gets the access tokens of remote MCP servers that ask for
// them, as the MCP specification's authorization section says (OAuth 2.1):
// discovery from a 401's WWW-Authenticate header, then a token by one of
// two grants, per server entry:
//
//   - client_credentials: unattended; the token is fetched, and fetched
//     again before it expires, without a person (client_secret, basic or
//     post, or private_key_jwt).
//   - authorization_code (the default): a person logs in once with
//     `mcpflow servers login NAME` (PKCE, a loopback redirect); the token
//     and its refresh token are kept in a Store outside the journal, and
//     runs refresh them. A run that meets a login it cannot refresh gets a
//     *LoginRequiredError, before its call reached the server.
//
// go-sdk's auth and oauthex packages do the discovery and the
// authorization code flow; golang.org/x/oauth2 does the grants.
package oauth

import (
	"fmt"
	"slices"
	"strings"
)

// Grants a server entry's oauth: may name.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// Config is a server entry's oauth: mapping. Values of ClientID,
// ClientSecret and PrivateKey may refer to the environment (${VAR}); the
// session expands them, never the parser.
type Config struct {
	// Grant is GrantAuthorizationCode (default, "") or
	// GrantClientCredentials.
	Grant string `yaml:"grant,omitempty" json:"grant,omitempty"`
	// ClientID is a client registered with the authorization server
	// beforehand. Without it, a login registers one: by the client ID
	// metadata document at ClientMetadataURL when the server supports
	// those, else by dynamic client registration.
	ClientID string `yaml:"client_id,omitempty" json:"client_id,omitempty"`
	// ClientSecret authenticates ClientID at the token endpoint
	// (client_secret_basic or client_secret_post, as the server says).
	ClientSecret string `yaml:"client_secret,omitempty" json:"client_secret,omitempty"`
	// PrivateKey authenticates ClientID with a signed JWT
	// (private_key_jwt): a PEM private key (EC or RSA), or the path of a
	// file holding one. SigningAlg is the JWS algorithm; default ES256 for
	// an EC key, RS256 for an RSA key.
	PrivateKey string `yaml:"private_key,omitempty" json:"private_key,omitempty"`
	SigningAlg string `yaml:"signing_alg,omitempty" json:"signing_alg,omitempty"`
	// Scopes are asked for in addition to those the server names (in its
	// WWW-Authenticate challenge, else its metadata's scopes_supported).
	Scopes []string `yaml:"scopes,omitempty" json:"scopes,omitempty"`
	// ClientMetadataURL is the https URL of this client's ID metadata
	// document, used as its client_id where the authorization server
	// supports client ID metadata documents.
	ClientMetadataURL string `yaml:"client_metadata_url,omitempty" json:"client_metadata_url,omitempty"`
	// RedirectPort is the loopback port a login listens on for the
	// authorization server's redirect; 0, any free port. A client
	// registered beforehand with a fixed redirect URI needs it.
	RedirectPort int `yaml:"redirect_port,omitempty" json:"redirect_port,omitempty"`
}

// Keys are the keys of an oauth: mapping.
var Keys = []string{"grant", "client_id", "client_secret", "private_key", "signing_alg", "scopes", "client_metadata_url", "redirect_port"}

// GrantType is the grant, with the default filled in.
func (c *Config) GrantType() string {
	if c == nil || c.Grant == "" {
		return GrantAuthorizationCode
	}
	return c.Grant
}

// Check reports the first inconsistency as the key it is about and a
// message ending in what was expected.
func (c *Config) Check() (key, msg string) {
	switch c.Grant {
	case "", GrantAuthorizationCode, GrantClientCredentials:
	default:
		return "grant", fmt.Sprintf("unknown grant %q (expected authorization_code or client_credentials)", c.Grant)
	}
	if c.ClientSecret != "" && c.PrivateKey != "" {
		return "private_key", "sets both client_secret and private_key (expected one way for the client to authenticate)"
	}
	if (c.ClientSecret != "" || c.PrivateKey != "") && c.ClientID == "" {
		key := "client_secret"
		if c.PrivateKey != "" {
			key = "private_key"
		}
		return key, key + " without client_id (expected the client_id it authenticates)"
	}
	if c.GrantType() == GrantClientCredentials && (c.ClientID == "" || c.ClientSecret == "" && c.PrivateKey == "") {
		return "grant", "client_credentials needs a client registered beforehand (expected client_id, and client_secret or private_key)"
	}
	switch c.SigningAlg {
	case "", "ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
	default:
		return "signing_alg", fmt.Sprintf("unknown signing_alg %q (expected ES256, ES384, ES512, RS256, RS384, RS512, PS256, PS384 or PS512)", c.SigningAlg)
	}
	if c.SigningAlg != "" && c.PrivateKey == "" {
		return "signing_alg", "signing_alg without private_key (expected the private_key it signs with)"
	}
	if u := c.ClientMetadataURL; u != "" && (!strings.HasPrefix(u, "https://") || strings.Count(u, "/") < 3 || strings.HasSuffix(u, "://")) {
		return "client_metadata_url", fmt.Sprintf("client_metadata_url %q is not an https URL with a path (expected such as https://example.com/mcpflow/client.json)", u)
	}
	if c.RedirectPort < 0 || c.RedirectPort > 65535 {
		return "redirect_port", fmt.Sprintf("redirect_port %d out of range (expected a port from 1 to 65535, or 0 for any)", c.RedirectPort)
	}
	if i := slices.IndexFunc(c.Scopes, func(s string) bool { return s == "" || strings.ContainsAny(s, " \t\"") }); i >= 0 {
		return "scopes", fmt.Sprintf("scope %q is not a scope token (expected names without spaces or quotes, such as issues:write)", c.Scopes[i])
	}
	return "", ""
}

// Redacted is c with its secrets replaced by "<redacted>" unless they are
// only ${VAR} references (onlyVars says which are).
func (c *Config) Redacted(onlyVars func(string) bool) *Config {
	if c == nil {
		return nil
	}
	out := *c
	out.Scopes = slices.Clone(c.Scopes)
	for _, v := range []*string{&out.ClientSecret, &out.PrivateKey} {
		if *v != "" && !onlyVars(*v) && !isPath(*v) {
			*v = "<redacted>"
		}
	}
	return &out
}

// isPath reports whether a private_key value names a file rather than
// holding the key.
func isPath(v string) bool { return !strings.Contains(v, "-----BEGIN") }
