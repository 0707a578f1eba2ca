package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireTransport wraps a transport to see the messages as they cross the
// wire: it keeps the raw tools/list results (so annotations are known as
// declared, absent fields absent) and counts tools/call requests written,
// and resources/read and prompts/get requests.
type wireTransport struct {
	inner mcp.Transport
	tap   *wireTap
	// merge: the connection's Read also returns the messages injected
	// into it (the standalone stream of streamable HTTP, see
	// standaloneStream).
	merge bool

	mu   sync.Mutex
	conn *wireConn // the last connection made
}

type wireTap struct {
	// tooLarge: the connection broke on an inbound message over the
	// transport's limit.
	tooLarge atomic.Bool

	calls atomic.Int64
	reads atomic.Int64 // resources/read and prompts/get

	// secrets are scrubbed from log messages (notifications/message) as
	// they are read: a message the server sent before its answer to a call
	// is scrubbed with the secrets held while the call was made, however
	// late go-sdk hands it to the log. The log is the messages' one use.
	secrets *secretSet

	mu        sync.Mutex
	listIDs   map[any]bool
	annotated map[string]rawTool
	// pending are the methods of the requests written and not yet
	// answered, by id.
	pending map[any]string
	// owed counts the notifications/cancelled go-sdk still has to write for
	// tools/call requests Session.Call saw cancelled: go-sdk retires a
	// cancelled call at once and sends the notification from a goroutine
	// of its own, after the call returned. It goes negative when a
	// notification is written before Call counts it. settled is closed
	// while owed <= 0 or once the connection broke (nothing more will be
	// written).
	owed    int
	settled chan struct{}
	broken  bool

	// notified counts the notifications read that go-sdk hands to a
	// handler (ordered), handled those it handed: go-sdk retires a call's
	// response as it reads it, while notifications wait in a queue for
	// their handler, so a call returns before the progress and log
	// messages the server sent ahead of its answer are handled (see
	// Session.afterNotifications).
	notified, handled atomic.Int64

	// initialized, when set, is given the protocol version of the
	// server's answer to initialize, before go-sdk reads that answer (so
	// before it writes notifications/initialized).
	initialized func(version string)
}

// ordered are the notifications a session handles that a server sends
// during a call: they are handled before the call's answer is used.
var ordered = map[string]bool{
	"notifications/progress":               true,
	"notifications/message":                true,
	"notifications/resources/updated":      true,
	"notifications/tools/list_changed":     true,
	"notifications/prompts/list_changed":   true,
	"notifications/resources/list_changed": true,
	"notifications/elicitation/complete":   true,
}

// countHandled counts the notifications go-sdk handed to their handler,
// once handled.
func (t *wireTap) countHandled(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if ordered[method] {
			t.handled.Add(1)
		}
		return res, err
	}
}

// afterNotifications waits, at most d, until the notifications read so far
// are handled. One that never reaches a handler (go-sdk refused it: bad
// params) is given up on after d, and the counts are set even, so that
// it delays one call, not every later one.
func (t *wireTap) afterNotifications(d time.Duration) {
	want := t.notified.Load()
	if t.handled.Load() >= want {
		return
	}
	deadline := time.Now().Add(d)
	for wait := 50 * time.Microsecond; t.handled.Load() < want; wait = min(2*wait, 5*time.Millisecond) {
		if time.Now().After(deadline) {
			if short := want - t.handled.Load(); short > 0 {
				t.handled.Add(short)
			}
			return
		}
		time.Sleep(wait)
	}
}

// owe counts one notifications/cancelled to come, for a call that
// returned because its context ended; on a broken connection none will.
func (t *wireTap) owe() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.broken {
		t.settleLocked(+1)
	}
}

// settleLocked adds delta to owed and opens or closes settled as owed
// crosses 0. t.mu is held.
func (t *wireTap) settleLocked(delta int) {
	before := t.owed
	t.owed += delta
	switch {
	case before <= 0 && t.owed > 0:
		t.settled = make(chan struct{})
	case before > 0 && t.owed <= 0:
		close(t.settled)
	}
}

// broke records that the connection can carry nothing more: what is owed
// will never be written, and no answer will come.
func (t *wireTap) broke() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.broken = true
	t.pending = map[any]string{}
	if t.owed > 0 {
		t.settleLocked(-t.owed)
	}
}

// awaitCancels waits until every notifications/cancelled owed is written,
// or d passed, and reports whether they were.
func (t *wireTap) awaitCancels(d time.Duration) bool {
	t.mu.Lock()
	ch, owed := t.settled, t.owed
	t.mu.Unlock()
	if owed <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
		return true
	case <-timer.C:
		return false
	}
}

type rawTool struct {
	Name         string          `json:"name"`
	Annotations  json.RawMessage `json:"annotations"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

func newWireTap() *wireTap {
	return &wireTap{listIDs: map[any]bool{}, annotated: map[string]rawTool{}, pending: map[any]string{}}
}

func (t *wireTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	wc := &wireConn{Connection: c, tap: t.tap, merge: t.merge}
	if t.merge {
		wc.done = make(chan struct{})
		wc.broken = make(chan struct{})
	}
	t.mu.Lock()
	t.conn = wc
	t.mu.Unlock()
	return wc, nil
}

// closeConn closes the last connection made, if it is not closed yet.
func (t *wireTransport) closeConn() {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

type wireConn struct {
	mcp.Connection
	tap *wireTap

	// A merging connection (wireTransport.merge) also returns from Read
	// the messages injected into it (inject) from elsewhere; each source
	// keeps its order. It has no goroutine of its own: Read calls the
	// inner Read with a context that inject cancels (wake) to hand its
	// message over; the inner Read gives up at once, and loses nothing
	// (go-sdk's Read takes a message from a channel, or returns on the
	// context).
	merge bool
	mu    sync.Mutex
	// queued are the injected messages not read yet, in order.
	queued []injection
	// wake ends the inner Read in progress, if any: it cancels the
	// context Read gave it, for an injected message.
	wake context.CancelCauseFunc
	// done is closed by Close; broken once the inner Read failed (not
	// woken), with readErr.
	done    chan struct{}
	broken  chan struct{}
	readErr error

	closeOnce sync.Once
	closeErr  error
}

// injection is a message injected into a merging connection; taken is
// closed once Read returned it.
type injection struct {
	msg   jsonrpc.Message
	taken chan struct{}
}

// errWoken ends an inner Read for an injected message.
var errWoken = errors.New("woken for an injected message")

// Close closes the inner connection once; later calls return the first
// result.
func (c *wireConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.Connection.Close()
		if c.merge {
			close(c.done)
		}
	})
	return c.closeErr
}

// inject hands msg to Read, as if the inner connection had read it, and
// returns once Read took it. It fails once the connection is closed or
// broken, or ctx ended, before Read took it.
func (c *wireConn) inject(ctx context.Context, msg jsonrpc.Message) error {
	in := injection{msg: msg, taken: make(chan struct{})}
	c.mu.Lock()
	c.queued = append(c.queued, in)
	wake := c.wake
	c.mu.Unlock()
	if wake != nil {
		wake(errWoken)
	}
	var err error
	select {
	case <-in.taken:
		return nil
	case <-c.done:
		err = net.ErrClosed
	case <-c.broken:
		err = net.ErrClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.queued, func(q injection) bool { return q.taken == in.taken })
	if i < 0 {
		return nil // taken after all
	}
	c.queued = slices.Delete(c.queued, i, i+1)
	return err
}

// read is the inner Read, or the merged one.
func (c *wireConn) read(ctx context.Context) (jsonrpc.Message, error) {
	if !c.merge {
		return c.Connection.Read(ctx)
	}
	for {
		c.mu.Lock()
		if len(c.queued) > 0 {
			in := c.queued[0]
			c.queued = slices.Delete(c.queued, 0, 1)
			c.mu.Unlock()
			close(in.taken)
			return in.msg, nil
		}
		if c.readErr != nil {
			err := c.readErr
			c.mu.Unlock()
			return nil, err
		}
		rctx, wake := context.WithCancelCause(ctx)
		c.wake = wake
		c.mu.Unlock()
		msg, err := c.Connection.Read(rctx)
		c.mu.Lock()
		c.wake = nil
		c.mu.Unlock()
		woken := errors.Is(context.Cause(rctx), errWoken)
		wake(nil)
		if err == nil {
			return msg, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if woken {
			continue // an injected message is queued
		}
		c.mu.Lock()
		if c.readErr == nil {
			c.readErr = err
			close(c.broken)
		}
		c.mu.Unlock()
		return nil, err
	}
}

func (c *wireConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, _ := msg.(*jsonrpc.Request)
	if req != nil && req.ID.IsValid() {
		if req.Method == "tools/call" {
			c.tap.calls.Add(1)
		} else if req.Method == "resources/read" || req.Method == "prompts/get" {
			c.tap.reads.Add(1)
		}
		c.tap.mu.Lock()
		if req.Method == "tools/list" {
			c.tap.listIDs[req.ID.Raw()] = true
		}
		c.tap.pending[req.ID.Raw()] = req.Method
		c.tap.mu.Unlock()
	}
	err := c.Connection.Write(ctx, msg)
	switch {
	case req == nil:
	case req.Method == "notifications/cancelled":
		c.tap.cancelWritten(req.Params)
	case err != nil && req.ID.IsValid():
		c.tap.mu.Lock()
		delete(c.tap.pending, req.ID.Raw()) // not sent: no answer will come
		c.tap.mu.Unlock()
	}
	return err
}

// cancelWritten pays what is owed for a notifications/cancelled just
// written (or tried), unless it names a request still pending that owes
// none (see owesCancel: a cancelled tools/list owes nothing). One naming a
// request already answered pays too: its answer and its cancellation
// crossed.
func (t *wireTap) cancelWritten(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	method, pending := t.pending[id.Raw()]
	delete(t.pending, id.Raw())
	if !pending || owesCancel(method) {
		t.settleLocked(-1)
	}
}

// owesCancel reports whether a request of method, cancelled, is owed its
// notifications/cancelled: a tools/call (Session.Call), a resources/read
// or a prompts/get (ReadResource, GetPrompt) — the requests a step sends.
func owesCancel(method string) bool {
	return method == "tools/call" || method == "resources/read" || method == "prompts/get"
}

func (c *wireConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.read(ctx)
	if frameTooLarge(err) {
		c.tap.tooLarge.Store(true)
	}
	if err != nil && ctx.Err() == nil {
		c.tap.broke()
	}
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "notifications/message" && c.tap.secrets != nil {
		req.Params = c.tap.secrets.scrubJSON(req.Params)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && !req.IsCall() && ordered[req.Method] {
		c.tap.notified.Add(1)
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil && resp.ID.IsValid() {
		c.tap.mu.Lock()
		isList := c.tap.listIDs[resp.ID.Raw()]
		method := c.tap.pending[resp.ID.Raw()]
		delete(c.tap.listIDs, resp.ID.Raw())
		delete(c.tap.pending, resp.ID.Raw())
		c.tap.mu.Unlock()
		if isList && resp.Error == nil {
			c.tap.recordList(resp.Result)
		}
		if method == "initialize" && resp.Error == nil && c.tap.initialized != nil {
			var res struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(resp.Result, &res) == nil && res.ProtocolVersion != "" {
				c.tap.initialized(res.ProtocolVersion)
			}
		}
	}
	return msg, err
}

func (t *wireTap) recordList(result json.RawMessage) {
	var page struct {
		Tools []rawTool `json:"tools"`
	}
	if json.Unmarshal(result, &page) != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, rt := range page.Tools {
		if string(rt.Annotations) == "null" {
			rt.Annotations = nil
		}
		t.annotated[rt.Name] = rt
	}
}

// forgetTools drops the tools recorded from earlier listings.
func (t *wireTap) forgetTools() {
	t.mu.Lock()
	t.annotated = map[string]rawTool{}
	t.mu.Unlock()
}

func (t *wireTap) raw(name string) (rawTool, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rt, ok := t.annotated[name]
	return rt, ok
}
