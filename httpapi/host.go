package httpapi

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// hosts is the set of names a TCP listener answers to (see allow).
type hosts struct {
	names map[string]bool // lower case, without a port
	// anyIP: listening on every address (0.0.0.0, [::], ":PORT"), any IP
	// literal is one of this machine's own.
	anyIP bool
}

// newHosts is what a server listening on listen answers to: localhost, a
// loopback address, the host given to listen, and extra (--allowed-host).
func newHosts(listen string, extra []string) hosts {
	h := hosts{names: map[string]bool{"localhost": true}}
	host, _, err := net.SplitHostPort(listen)
	ip := net.ParseIP(host)
	switch {
	case err != nil:
	case host == "" || ip != nil && ip.IsUnspecified():
		h.anyIP = true
	default:
		h.names[strings.ToLower(host)] = true
	}
	for _, name := range extra {
		h.names[strings.ToLower(name)] = true
	}
	return h
}

// allow reports whether a request for host (the Host header, with or
// without a port) may be served. A name not on the list is how a DNS
// rebinding attack reaches a loopback server: a page of evil.example whose
// name was made to resolve to 127.0.0.1 is same-origin with itself, and
// would read and act through the API without a token. An IP literal
// cannot be rebound, so a loopback one is always allowed.
func (h hosts) allow(host string) bool {
	if name, _, err := net.SplitHostPort(host); err == nil {
		host = name
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if host == "" {
		return false
	}
	if h.names[host] {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || h.anyIP
	}
	return false
}

// checkHost wraps h, the handler of a TCP listener: a request whose Host
// is not allowed is refused with 403 before any handler runs, and so is a
// browser's request for the API, the MCP endpoint or the metrics from another site (a page
// cannot read the answer, but could still start servers, decrypt the
// journal for nothing or hold the browser's connections to this host with
// event streams). What passes is marked as come over TCP (see overTCP).
func (s *Server) checkHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.allow(r.Host) {
			named := "a request without a Host"
			if r.Host != "" {
				named = "the host name " + quoteHost(r.Host)
			}
			writeError(w, http.StatusForbidden, "host_not_allowed",
				"this mcpflow server does not answer to "+named+": only to localhost, a loopback address and the names it was started with (--listen, --allowed-host); "+
					"a page that reaches it under another name may be a DNS rebinding attack")
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); (site == "cross-site" || site == "same-site") &&
			(strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics" || r.URL.Path == "/mcp") {
			writeError(w, http.StatusForbidden, "cross_site", "cross-site requests are refused")
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tcpKey{}, true)))
	})
}

// quoteHost is a Host header shown in a message: quoted, cut if long.
func quoteHost(host string) string {
	if len(host) > 100 {
		host = host[:100]
	}
	return strconv.Quote(host)
}

type tcpKey struct{}

// overTCP reports whether r came through a TCP listener (see checkHost).
func overTCP(r *http.Request) bool { return r.Context().Value(tcpKey{}) != nil }
