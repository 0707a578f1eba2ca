package upstream

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpIdleConns is how many idle connections the transport of sessions
// (newSessionTransport) keeps per host (net/http keeps 2 by default). A session that runs share
// (Server.Sessions) has as many POSTs in flight as calls, each on a
// connection of its own: one not kept is a new TCP connection, and a
// socket in TIME_WAIT, for a later call.
const httpIdleConns = 256

// httpBufferSize is the size of the read buffer and of the write buffer
// of each connection of the transport of sessions (newSessionTransport;
// net/http's default: 4 KiB each). A connection mostly waits: a call's response stream open
// while its server waits for an answer, the standalone stream. A body
// read with a larger buffer than this bypasses it (go-sdk reads an event
// stream 4 KiB at a time); a request larger than it is written in one
// more write.
const httpBufferSize = 1 << 10

// httpClient returns the client of an http or sse session: the base client
// with a Transport that adds the server's headers. Without a base client,
// its transport is the one of the Shared the session's pool was given, or
// one of its own.
func (s *Session) httpClient(o Options, endpoint string, headers http.Header) *http.Client {
	var hc http.Client
	if o.HTTPClient != nil {
		hc = *o.HTTPClient
	}
	base := hc.Transport
	switch {
	case base != nil:
	case o.transport != nil:
		base = o.transport
	default:
		if t := newSessionTransport(); t != nil {
			s.ownHTTP = t
			base = t
		} else {
			base = http.DefaultTransport
		}
	}
	host := ""
	if u, err := url.Parse(endpoint); err == nil {
		host = u.Host
	}
	s.header = &headerTransport{base: base, host: host, headers: headers}
	hc.Transport = s.header
	return &hc
}

// newSessionTransport returns a clone of http.DefaultTransport with the
// settings of sessions (httpIdleConns, httpBufferSize), or nil when
// http.DefaultTransport is not an *http.Transport.
func newSessionTransport() *http.Transport {
	dt, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil
	}
	t := dt.Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = httpIdleConns, httpIdleConns
	t.ReadBufferSize, t.WriteBufferSize = httpBufferSize, httpBufferSize
	return t
}

// headerTransport adds configured headers to every request to the
// endpoint's host (not to another host a redirect or an SSE endpoint event
// points to: the headers often carry credentials). It never replaces a
// header the MCP transport set itself (Mcp-Session-Id,
// Mcp-Protocol-Version, Accept, Content-Type, Last-Event-ID).
//
// Once a streamable HTTP session is initialized (setProtocol), it also
// adds Mcp-Protocol-Version to the requests that lack it: go-sdk sets it
// only once told of the session's state through an interface our wire tap
// (wireConn) cannot pass on, so without this its later requests would go
// without it.
type headerTransport struct {
	base     http.RoundTripper
	host     string
	headers  http.Header
	protocol atomic.Pointer[string] // the negotiated version, once known
}

// setProtocol has every later request to the endpoint's host carry
// Mcp-Protocol-Version: version, unless it carries one already.
func (t *headerTransport) setProtocol(version string) {
	if version != "" {
		t.protocol.Store(&version)
	}
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host {
		return t.base.RoundTrip(req)
	}
	version := t.protocol.Load()
	if len(t.headers) == 0 && (version == nil || req.Header.Get(protocolVersionHeader) != "") {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	for k, vs := range t.headers {
		if _, set := r.Header[k]; set {
			continue
		}
		r.Header[k] = append([]string(nil), vs...)
	}
	if version != nil && r.Header.Get(protocolVersionHeader) == "" {
		r.Header.Set(protocolVersionHeader, *version)
	}
	return t.base.RoundTrip(r)
}

// protocolVersionHeader is the header of a streamable HTTP request that
// names the session's protocol version.
const protocolVersionHeader = "Mcp-Protocol-Version"

// detachedTransport connects the inner transport with a context that ends
// when the connection is closed, not when Connect's context ends. go-sdk's
// SSE client keeps the context of Connect for its event stream, so a
// connect timeout (or a cancelled step) would otherwise break the session
// later. Connect's context still bounds the handshake.
type detachedTransport struct {
	inner mcp.Transport
}

func (t *detachedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	connCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	c, err := t.inner.Connect(connCtx)
	if !stop() { // ctx ended during the handshake, and cancel ran
		if err == nil {
			c.Close()
		}
		return nil, context.Cause(ctx)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &cancelConn{Connection: c, cancel: cancel}, nil
}

// cancelConn ends its context when closed.
type cancelConn struct {
	mcp.Connection
	cancel context.CancelFunc
}

func (c *cancelConn) Close() error {
	err := c.Connection.Close()
	c.cancel()
	return err
}
