package upstream

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"sync"
	"time"
)

// maxStderrLine bounds the part of a stderr line held for its end: longer
// lines reach the log in pieces of about this size.
const maxStderrLine = 64 << 10

// stderrGrace is how long closing a pump waits, after the server exited,
// for the processes that inherited its stderr to close it too.
const stderrGrace = time.Second

// stderrPump copies a stdio server's stderr into the server's log, whole
// lines at a time, scrubbed of the secrets the session holds (see
// [Session.HoldSecrets]). The server writes one end of a pipe; the pump's
// goroutine reads the other.
//
// The session owns the pump: it starts with the server's command, and the
// session closes it once the server has exited, which waits for the
// goroutine and for the last bytes to reach the log. Nothing of it outlives
// the session.
//
// A drain is ordered with the server's writes by a marker the pump itself
// writes into the same pipe (it keeps a write end for this): a pipe is
// first in, first out, and a write this small is atomic, so by the time
// the goroutine reads the marker it has read everything the server wrote
// before the drain began, and scrubbed it with the secrets held then.
type stderrPump struct {
	r, w    *os.File // the pipe; the server has a copy of w
	marker  []byte   // random, starting and ending with NUL: not text a server writes
	secrets *secretSet
	out     func([]byte) // appends whole lines to the log

	markMu sync.Mutex // orders the drains' tickets as their markers in the pipe
	marked uint64     // markers written

	seenMu sync.Mutex
	seen   uint64        // markers read
	seenCh chan struct{} // closed, and replaced, at each marker read

	done      chan struct{} // closed when the goroutine has ended
	closeOnce sync.Once
}

// newStderrPump makes the pipe and starts the goroutine; cmd.Stderr takes
// the returned pump's w.
func newStderrPump(secrets *secretSet, out func([]byte)) (*stderrPump, error) {
	token := make([]byte, 16)
	rand.Read(token) // never fails (crypto/rand)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	p := &stderrPump{r: r, w: w, marker: fmt.Appendf(nil, "\x00mcpflow-drain-%x\x00", token), secrets: secrets, out: out,
		seenCh: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p, nil
}

// run reads the pipe until every write end is closed (or close gives up
// waiting), writing what it read to the log.
func (p *stderrPump) run() {
	defer close(p.done)
	buf := make([]byte, 32<<10)
	var pending []byte // read, not yet looked at whole: may end with the start of a marker
	var line []byte    // the start of a line, held for its end
	for {
		n, err := p.r.Read(buf)
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.Index(pending, p.marker)
			if i < 0 {
				break
			}
			line = p.lines(append(line, pending[:i]...))
			// What is held now holds the secrets still held: scrubbed
			// before a drain lets them go.
			line = []byte(p.secrets.scrub(string(line)))
			pending = pending[i+len(p.marker):]
			p.markerRead()
		}
		if err != nil {
			// The end (EOF, or the read end closed by close): the last
			// bytes, a marker's start included, and a line end for the
			// next session's log lines.
			line = p.lines(append(line, pending...))
			if len(line) > 0 {
				p.out(append([]byte(p.secrets.scrub(string(line))), '\n'))
			}
			return
		}
		k := len(pending) - markerStart(pending, p.marker)
		line = p.lines(append(line, pending[:k]...))
		pending = append(pending[:0], pending[k:]...)
	}
}

// lines writes the whole lines of b, scrubbed, and returns the rest: the
// start of a line. A rest longer than maxStderrLine is written too, but
// for its last bytes, as many as the longest secret less one, which may be
// the start of a secret.
func (p *stderrPump) lines(b []byte) []byte {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		p.out([]byte(p.secrets.scrub(string(b[:i+1]))))
		b = append(b[:0], b[i+1:]...)
	}
	if len(b) <= maxStderrLine {
		return b
	}
	longest := 0
	if v := p.secrets.current(); v != nil {
		longest = v.longest
	}
	s := p.secrets.scrub(string(b))
	cut := len(s) - max(longest-1, 0)
	if cut <= 0 {
		return append(b[:0], s...)
	}
	p.out([]byte(s[:cut]))
	return append(b[:0], s[cut:]...)
}

// markerStart is the length of the longest end of b that begins marker.
func markerStart(b, marker []byte) int {
	for k := min(len(b), len(marker)-1); k > 0; k-- {
		if bytes.HasSuffix(b, marker[:k]) {
			return k
		}
	}
	return 0
}

func (p *stderrPump) markerRead() {
	p.seenMu.Lock()
	p.seen++
	close(p.seenCh)
	p.seenCh = make(chan struct{})
	p.seenMu.Unlock()
}

// drain returns once everything the server wrote to stderr before drain
// was called has been read and scrubbed with the secrets held now (or the
// pump has ended: after close it returns at once).
func (p *stderrPump) drain() {
	p.markMu.Lock()
	if _, err := p.w.Write(p.marker); err != nil {
		p.markMu.Unlock()
		return // closed: the goroutine has read or is reading its last
	}
	p.marked++
	ticket := p.marked
	p.markMu.Unlock()
	for {
		p.seenMu.Lock()
		seen, next := p.seen, p.seenCh
		p.seenMu.Unlock()
		if seen >= ticket {
			return
		}
		select {
		case <-next:
		case <-p.done:
			return
		}
	}
}

// close stops the pump, once the server has exited: it closes the pump's
// own write end, waits up to stderrGrace for the server's children to
// close theirs, then closes the read end, and returns when the goroutine
// has written what it read. Output of a child that kept stderr open longer
// is lost. close is idempotent.
func (p *stderrPump) close() {
	p.closeOnce.Do(func() {
		p.markMu.Lock()
		p.w.Close()
		p.markMu.Unlock()
		t := time.NewTimer(stderrGrace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		}
		p.r.Close() // ends a Read still waiting
		<-p.done
	})
}
