package httpapi

import (
	"io"
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
	// Write is how long one write of an answer may take: a client that
	// stops reading loses the connection, whatever the answer (an event
	// stream, an export) — however long the server took to compute it.
	// Default 60s.
	Write time.Duration
	// Idle is how long a kept-alive connection may wait for its next
	// request. Default 120s.
	Idle time.Duration
	// PerClient is how many connections one client may hold open at once
	// on a TCP listener; the next is closed as it is accepted. A client is
	// an IPv4 address, an IPv6 /64, or loopback as a whole. Default 64 — a
	// browser opens 6 to a host and one per event stream.
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
// The write timeout is per write (see writeDeadlines), not net/http's
// WriteTimeout, which would count the time an answer takes to compute and
// end every event stream.
func (l Limits) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           writeDeadlines(h, l.Write),
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		IdleTimeout:       l.Idle,
	}
}

// writeDeadlines gives every write of an answer (and its flush) d to
// complete.
func writeDeadlines(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		dw.extend() // for what net/http writes itself when the handler wrote nothing
		h.ServeHTTP(dw, r)
	})
}

type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) extend() { w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) Flush() { w.FlushError() }

// FlushError is Flush with its error, for http.ResponseController.
func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

// Unwrap is for http.ResponseController.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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
		ip := clientOf(conn.RemoteAddr())
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

// clientOf is the key a connection counts under: loopback as one client
// (every 127.x.y.z and ::1 is this machine), an IPv6 address by its /64
// (what one host is given), an IPv4 address as it is.
func clientOf(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.IsLoopback():
		return "loopback"
	case ip.To4() == nil:
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
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

// CloseWrite half-closes a TCP connection, as net/http does after an
// error answer to a request whose body it did not read.
func (c *counted) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the TCP connection's sendfile for the files it serves.
func (c *counted) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.Conn, r)
}
