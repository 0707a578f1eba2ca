package oauth

import (
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"
)

// Handler is what a session of the server at endpoint authorizes its
// requests with (go-sdk's StreamableClientTransport.OAuthHandler):
// tokens of the client credentials grant, shared by the sessions of this
// process, or a person's stored login. cfg's secrets are expanded; hc
// reaches the authorization server.
func Handler(server, endpoint string, cfg Config, store *Store, hc *http.Client) auth.OAuthHandler {
	if hc == nil {
		hc = http.DefaultClient
	}
	if cfg.GrantType() == GrantClientCredentials {
		h := &unattended{server: server, endpoint: endpoint, cfg: cfg, hc: hc}
		key := unattendedKey{Canonical(endpoint), cfg.ClientID}
		if v, ok := unattendedTokens.Load(key); ok {
			c := v.(*unattendedCache)
			c.mu.Lock()
			h.ts, h.granted = c.ts, c.granted
			c.mu.Unlock()
		}
		h.share = func(ts oauth2.TokenSource, granted []string) {
			v, _ := unattendedTokens.LoadOrStore(key, &unattendedCache{})
			c := v.(*unattendedCache)
			c.mu.Lock()
			c.ts, c.granted = ts, granted
			c.mu.Unlock()
		}
		return h
	}
	return &stored{server: server, endpoint: endpoint, cfg: cfg, store: store, hc: hc}
}

// unattendedTokens are the client credentials tokens of this process, by
// server and client: a new session starts with the last one got.
var unattendedTokens sync.Map // unattendedKey → *unattendedCache

type unattendedKey struct{ endpoint, clientID string }

type unattendedCache struct {
	mu      sync.Mutex
	ts      oauth2.TokenSource
	granted []string
}
