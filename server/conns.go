package server

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what one client can hold of a TCP listener. The unix
// socket, private to the journal's owner, has only the header and idle
// timeouts: the owner's requests (a check, an export of a large journal)
// may take as long as they need.
type Limits struct {
	// ReadHeader is how long a client may take to send a request's
	// headers; Read, the whole request with its body. Default 10s, 60s.
	ReadHeader, Read time.Duration
	// Write is how long an answer may take to send; event streams and
	// exports, which last as long as they have something to send, are
	// exempt. Default 60s.
	Write time.Duration
	// Idle is how long a kept-alive connection may wait for its next
	// request. Default 120s.
	Idle time.Duration
	// PerClient is how many connections one client address may hold open
	// at once on a TCP listener; the next is closed as it is accepted.
	// Default 64 — a browser opens 6 to a host and one per event stream.
	PerClient int
}

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeader, 10*time.Second)
	def(&l.Read, 60*time.Second)
	def(&l.Write, 60*time.Second)
	def(&l.Idle, 120*time.Second)
	if l.PerClient <= 0 {
		l.PerClient = 64
	}
	return l
}

// httpServer is an http.Server for h, on TCP, with the limits' timeouts.
func (l Limits) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
	}
}

// streaming lifts the read and write deadlines of a response that lasts as
// long as it has something to send (an event stream, an export): the
// request was read whole, and the client reads at its own pace.
func streaming(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
}

// capped is a listener that lets each client address hold at most max
// connections: a flood from one client cannot take every connection the
// process can hold.
type capped struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int // by client IP
}

func capPerClient(l net.Listener, max int) *capped {
	return &capped{Listener: l, max: max, open: map[string]int{}}
}

// Accept returns the next connection from a client under its cap; one
// over it is closed at once.
func (c *capped) Accept() (net.Conn, error) {
	for {
		conn, err := c.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(conn.RemoteAddr())
		c.mu.Lock()
		over := c.open[ip] >= c.max
		if !over {
			c.open[ip]++
		}
		c.mu.Unlock()
		if over {
			conn.Close()
			continue
		}
		return &counted{Conn: conn, release: func() { c.release(ip) }}, nil
	}
}

func (c *capped) release(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[ip]--; c.open[ip] <= 0 {
		delete(c.open, ip)
	}
}

func clientIP(a net.Addr) string {
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// counted is a connection that gives its place back once, when closed.
type counted struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *counted) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
