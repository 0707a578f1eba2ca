package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// challenge is what a 401 or 403 said in its WWW-Authenticate header.
type challenge struct {
	status int
	// err is the Bearer challenge's error ("insufficient_scope", …).
	err string
	// scopes are the Bearer challenge's scope, metadata the URL of the
	// server's protected resource metadata, when it said.
	scopes   []string
	metadata string
}

func readChallenge(resp *http.Response) challenge {
	c := challenge{status: resp.StatusCode}
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return c
	}
	for _, ch := range cs {
		if c.metadata == "" {
			c.metadata = ch.Params["resource_metadata"]
		}
		if ch.Scheme != "bearer" {
			continue
		}
		if c.err == "" {
			c.err = ch.Params["error"]
		}
		if len(c.scopes) == 0 && ch.Params["scope"] != "" {
			c.scopes = strings.Fields(ch.Params["scope"])
		}
	}
	return c
}

// servers is what discovery found: the protected resource's metadata and
// its authorization server's.
type servers struct {
	resource *oauthex.ProtectedResourceMetadata
	auth     *oauthex.AuthServerMeta
	// resourceURL is where the resource metadata was read, "" if nowhere.
	resourceURL string
}

// discover finds the authorization server of the MCP server at endpoint,
// as the MCP specification says: the protected resource metadata named by
// the challenge, else at the well-known path of the endpoint, else at the
// root; without any (2025-03-26), the server's origin is the authorization
// server. Its metadata comes from the RFC 8414 and OpenID paths, else the
// 2025-03-26 default endpoints.
func discover(ctx context.Context, endpoint string, ch challenge, hc *http.Client) (*servers, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("server URL %q does not parse", endpoint)
	}
	root := *u
	root.Path, root.RawQuery, root.Fragment = "", "", ""
	tries := resourceMetadataPlaces(u)
	if ch.metadata != "" {
		tries = append([][2]string{{ch.metadata, endpoint}}, tries...)
	}
	var prm *oauthex.ProtectedResourceMetadata
	var metaAt string
	for _, t := range tries {
		m, err := oauthex.GetProtectedResourceMetadata(ctx, t[0], t[1], hc)
		if err != nil || m == nil {
			continue
		}
		if len(m.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("the protected resource metadata of %s names no authorization server", endpoint)
		}
		prm, metaAt = m, t[0]
		break
	}
	legacy := prm == nil
	if legacy {
		prm = &oauthex.ProtectedResourceMetadata{Resource: endpoint, AuthorizationServers: []string{root.String()}}
	}
	issuer := prm.AuthorizationServers[0]
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, hc)
	if legacy && (err != nil || asm == nil) {
		if m := originMeta(ctx, endpoint, hc); m != nil {
			asm, err = m, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the metadata of authorization server %s: %w", issuer, err)
	}
	if asm == nil {
		base := strings.TrimSuffix(issuer, "/")
		asm = &oauthex.AuthServerMeta{Issuer: issuer, AuthorizationEndpoint: base + "/authorize", TokenEndpoint: base + "/token", RegistrationEndpoint: base + "/register"}
	}
	return &servers{resource: prm, auth: asm, resourceURL: metaAt}, nil
}

// resourceOf is the resource indicator (RFC 8707) tokens are asked for.
func (s *servers) resourceOf(endpoint string) string {
	if s.resource.Resource != "" {
		return s.resource.Resource
	}
	return endpoint
}

// originMeta is the authorization server metadata a server's origin
// serves at /.well-known/oauth-authorization-server, read as the
// 2025-03-26 specification's clients read it: for a server without
// protected resource metadata, whose origin is its authorization server,
// the document is taken from that origin whatever issuer it names (RFC
// 8414's issuer check guards against a client being sent to another
// server's metadata; here the server the user configured is the only one
// asked). nil when there is none, or it lacks the endpoints.
func originMeta(ctx context.Context, endpoint string, hc *http.Client) *oauthex.AuthServerMeta {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil
	}
	u.Path, u.RawQuery, u.Fragment = "/.well-known/oauth-authorization-server", "", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var m oauthex.AuthServerMeta
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m) != nil ||
		m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
		return nil
	}
	return &m
}

// resourceMetadataPlaces are where the server at u may serve its
// protected resource metadata, each with the resource it must name: at
// the well-known path of the endpoint, then at the root.
func resourceMetadataPlaces(u *url.URL) [][2]string {
	at, root := *u, *u
	at.RawQuery, at.Fragment = "", ""
	at.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")
	root.Path, root.RawQuery, root.Fragment = "", "", ""
	return [][2]string{{at.String(), u.String()}, {root.String() + "/.well-known/oauth-protected-resource", root.String()}}
}

// hasResourceMetadata reports whether the server at endpoint serves
// protected resource metadata at either well-known place.
func hasResourceMetadata(ctx context.Context, endpoint string, hc *http.Client) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	for _, t := range resourceMetadataPlaces(u) {
		if m, err := oauthex.GetProtectedResourceMetadata(ctx, t[0], t[1], hc); err == nil && m != nil {
			return true
		}
	}
	return false
}
