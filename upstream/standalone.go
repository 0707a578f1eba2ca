package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The standalone stream of streamable HTTP (protocols before 2026-07-28):
// a GET of the endpoint that the server answers with an event stream, on
// which it sends what is not part of an answer to a request — requests of
// its own (elicitation/create), notifications/tools/list_changed, log
// messages. go-sdk opens it only when told the session is initialized,
// through an unexported interface the wire tap cannot pass on; so the
// session opens it itself and injects what arrives into the tap
// (wireConn.inject), where go-sdk reads it as it reads the rest. Answers to
// the server's requests go out as go-sdk writes them: POSTs.

// Bounds of the standalone stream's reconnects: after standaloneRetries
// tries in a row that brought nothing (no event), the session goes on
// without the stream.
const (
	// standaloneOpenWait bounds how long Connect waits for the answer to
	// the stream's first GET (see startStream).
	standaloneOpenWait = 2 * time.Second
	standaloneRetries  = 3
	standaloneDelay    = 250 * time.Millisecond
	standaloneMaxDelay = 5 * time.Second
)

// standaloneStream is the goroutine that reads a session's standalone
// stream. It is owned by the Session: started by startStream once the
// session is initialized, ended by stopStream (Close), which waits for it.
type standaloneStream struct {
	url       string
	client    *http.Client // the session's: its configured headers, Mcp-Protocol-Version
	sessionID string
	conn      *wireConn
	maxEvent  int
	// note writes a line to the server's log (why the stream ended).
	note func(string)

	cancel context.CancelFunc
	done   chan struct{}
	// opened is closed once the first GET was answered (or failed).
	opened chan struct{}
}

// startStream opens the standalone stream of a streamable HTTP session
// whose protocol has one, unless the server offers none. The wait it
// returns waits, at most standaloneOpenWait from the start and while ctx
// lasts, for the server to answer the first GET, as go-sdk does: a server
// that sends on the stream as soon as it is asked something (an
// elicitation during the session's first call) finds it open, not "not
// connected". Connect sends its other requests meanwhile. A server slow to
// answer still gets its stream, later.
func (s *Session) startStream(ctx context.Context, conn *wireConn) (wait func()) {
	version := s.ProtocolVersion()
	if conn == nil || !conn.merge || version == "" || version >= newProtocol {
		return func() {} // 2026-07-28 has no standalone stream (SEP-2575)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	st := &standaloneStream{
		url: s.endpoint, client: s.hc, sessionID: s.cs.ID(), conn: conn,
		maxEvent: int(s.server.maxMessageSize()),
		note: func(msg string) {
			s.writeLog(fmt.Sprintf("%s [mcpflow] standalone stream: %s", logTime(time.Now()), oneLine(msg)))
		},
		cancel: cancel, done: make(chan struct{}), opened: make(chan struct{}),
	}
	s.stream = st
	go st.run(runCtx)
	t := time.NewTimer(standaloneOpenWait)
	return func() {
		defer t.Stop()
		select {
		case <-st.opened:
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// stopStream ends the standalone stream, if any, and waits for its
// goroutine. Idempotent.
func (s *Session) stopStream() {
	if st := s.stream; st != nil {
		st.cancel()
		<-st.done
	}
}

// run reads the stream until ctx ends, the connection closes, or the
// server offers none (405, 404, 400, another 4xx, or no event stream).
// A dropped stream is reconnected with Last-Event-ID, after a backoff, at
// most standaloneRetries times in a row without an event.
func (st *standaloneStream) run(ctx context.Context) {
	defer close(st.done)
	first := true
	answered := func() {
		if first {
			close(st.opened)
			first = false
		}
	}
	defer answered()
	var lastID string
	var retry time.Duration // the server's retry: field
	for tries := 0; ; tries++ {
		if tries > standaloneRetries {
			st.note(fmt.Sprintf("gave up after %d tries", tries))
			return
		}
		if tries > 0 {
			delay := min(standaloneDelay<<(tries-1), standaloneMaxDelay)
			if retry > 0 {
				delay = retry
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		resp, err := st.get(ctx, lastID)
		answered()
		if ctx.Err() != nil {
			if err == nil {
				resp.Body.Close()
			}
			return
		}
		if err != nil {
			continue
		}
		if ok, again := streamAnswer(resp); !ok {
			resp.Body.Close()
			if !again {
				return
			}
			continue
		}
		got, err := st.read(ctx, resp.Body, &lastID, &retry)
		resp.Body.Close()
		switch {
		case ctx.Err() != nil, errors.Is(err, errConnGone):
			return // the session is closing, or its connection broke
		case errors.Is(err, errStreamFatal):
			st.note(err.Error())
			return
		case got:
			tries = 0 // progress: the next reconnect is the first
		}
	}
}

// streamAnswer says whether resp is an event stream to read, and if not,
// whether to try again (a server error, or too many requests) or give up
// (the server offers no standalone stream).
func streamAnswer(resp *http.Response) (ok, again bool) {
	switch c := resp.StatusCode; {
	case c == http.StatusOK:
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		return mt == "text/event-stream", false
	case c == http.StatusTooManyRequests || c == http.StatusRequestTimeout || c >= 500:
		return false, true
	default: // 405 as the spec says, or 404, 400, 401, …: no stream
		return false, false
	}
}

// get sends the GET that opens (or resumes, after lastID) the stream.
func (st *standaloneStream) get(ctx context.Context, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if st.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", st.sessionID)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	// The session's client adds the OAuth token (oauth.Transport): a
	// login that cannot be had fails the GET, and the stream ends.
	return st.client.Do(req)
}

// errStreamFatal: what the stream sent cannot be read on (an event over
// the size limit); it is not reconnected.
var errStreamFatal = errors.New("unreadable event")

// errConnGone: the connection the stream feeds is closed or broken.
var errConnGone = errors.New("connection closed")

// read injects the messages of one response body into the connection
// until the body ends. It reports whether any event arrived, and keeps
// the last event id and the server's retry delay.
func (st *standaloneStream) read(ctx context.Context, body io.Reader, lastID *string, retry *time.Duration) (got bool, err error) {
	for ev, err := range sseEvents(body, st.maxEvent) {
		if err != nil {
			if errors.Is(err, bufio.ErrTooLong) || errors.Is(err, errEventTooLarge) {
				return got, fmt.Errorf("%w: %v", errStreamFatal, err)
			}
			return got, err
		}
		got = true
		if ev.id != nil {
			*lastID = *ev.id
		}
		if ev.retry != "" {
			if ms, err := strconv.ParseInt(ev.retry, 10, 64); err == nil && ms >= 0 {
				*retry = min(time.Duration(ms)*time.Millisecond, standaloneMaxDelay)
			}
		}
		if len(ev.data) == 0 || ev.name != "" && ev.name != "message" {
			continue // a priming event (an id only), or not a message
		}
		msg, err := jsonrpc.DecodeMessage(ev.data)
		if err != nil {
			st.note(fmt.Sprintf("dropped an event that is no JSON-RPC message: %v", err))
			continue
		}
		if err := st.conn.inject(ctx, msg); err != nil {
			return got, fmt.Errorf("%w: %v", errConnGone, err)
		}
	}
	return got, nil
}

// sseEvent is one server-sent event. id is nil when the event set none.
type sseEvent struct {
	name  string
	data  []byte
	id    *string
	retry string
}

// sseStartBuffer is the size of the buffer that sseEvents starts with.
const sseStartBuffer = 512

// errEventTooLarge: an event's data is over the size limit.
var errEventTooLarge = errors.New("event larger than the message size limit")

// sseEvents parses an event stream (WHATWG server-sent events): lines of
// "field: value", a blank line ending an event, data lines joined with
// "\n", lines starting with ":" ignored. Lines end with "\n" or "\r\n"
// (a lone "\r" is not taken for a line end). An event whose data is over max
// bytes ends the sequence with errEventTooLarge. The stream's last event,
// if not ended by a blank line, is dropped, as the standard says.
func sseEvents(r io.Reader, max int) func(yield func(sseEvent, error) bool) {
	return func(yield func(sseEvent, error) bool) {
		sc := bufio.NewScanner(r)
		// The stream waits most of its life: a small buffer to start,
		// grown for long lines (a message is one data line).
		sc.Buffer(make([]byte, 0, sseStartBuffer), max+64)
		var ev sseEvent
		var data [][]byte
		size, started := 0, false
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				if started {
					ev.data = bytes.Join(data, []byte("\n"))
					if !yield(ev, nil) {
						return
					}
				}
				ev, data, size, started = sseEvent{}, nil, 0, false
				continue
			}
			if line[0] == ':' {
				continue // a comment, or a keep-alive
			}
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				ev.name, started = string(value), true
			case "data":
				size += len(value) + 1
				if size > max+1 {
					yield(sseEvent{}, errEventTooLarge)
					return
				}
				data, started = append(data, bytes.Clone(value)), true
			case "id":
				if bytes.IndexByte(value, 0) < 0 {
					id := string(value)
					ev.id, started = &id, true
				}
			case "retry":
				ev.retry, started = string(value), true
			}
		}
		if err := sc.Err(); err != nil {
			yield(sseEvent{}, err)
		}
	}
}
