// Package proxy is mcpflow proxy: an MCP server that stands in front of one
// configured server, for any MCP client. Everything the client and the
// server say passes through (lists, reads, prompts, completions,
// subscriptions, log messages, progress, list changes; the server's
// elicitation, sampling and roots requests go to the client), except that
// each tools/call is a step of the session's run in the journal: its intent
// durable before it is forwarded, its outcome durable before the client
// sees it, and a lost connection judged by the replay rule — a safe call is
// sent again after reconnecting, an unsafe one answers the stable
// MCPFLOW_OUTCOME_UNKNOWN tool error and waits for an operator.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
)

// Session is what the proxy needs of an open proxy session
// (service.Proxied): the run its calls are steps of, and the server's
// session, for everything else.
type Session interface {
	Call(ctx context.Context, tool string, args json.RawMessage, fw *engine.Forward) (engine.Answer, error)
	Upstream(ctx context.Context) (*upstream.Session, error)
	Reconnect(ctx context.Context, old *upstream.Session) (*upstream.Session, error)
	// Refind finds the journal again: it failed under a call before the
	// call was sent (the process written through is gone). The run goes on.
	Refind(ctx context.Context)
	Close() (*journal.Run, error)
}

// Opener opens the session of a client that initialized: it starts (or
// reaches) the server with the client's capabilities (peer) and journals
// the run.
type Opener func(ctx context.Context, client *mcp.Implementation, peer upstream.Peer) (Session, error)

// Proxy is the MCP server one client talks to. It opens its session when
// the client initializes.
type Proxy struct {
	server *mcp.Server
	open   Opener

	mu     sync.Mutex
	sess   Session
	ss     *mcp.ServerSession
	caps   *mcp.ClientCapabilities
	proto  string        // the protocol version the client asked for
	opened chan struct{} // closed once the session is open (or failed to)
	// ready is closed once the client said it is initialized: what the
	// server asks or says waits for it, so that nothing reaches the
	// client before its initialize is answered.
	ready     chan struct{}
	readyOnce sync.Once
	// done is closed once Close began: a renewed session is not stored.
	done chan struct{}
	err  error

	// calls are the contexts of the client's tools/call requests in
	// flight (see peer.on).
	calls map[uint64]context.Context
	seq   uint64

	closeOnce sync.Once
	closedRun *journal.Run
	closeErr  error
}

// New returns the proxy for one client; version is mcpflow's.
func New(open Opener, version string) *Proxy {
	p := &Proxy{open: open, opened: make(chan struct{}), ready: make(chan struct{}), done: make(chan struct{}), calls: map[uint64]context.Context{}}
	p.server = mcp.NewServer(&mcp.Implementation{Name: "mcpflow-proxy", Version: version}, &mcp.ServerOptions{
		SupportedProtocolVersions: handshakeVersions(),
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) {
			p.readyOnce.Do(func() { close(p.ready) })
		},
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			_, err := pass(ctx, p, func(cs *mcp.ClientSession) (mcp.Result, error) { return nil, cs.Subscribe(ctx, req.Params) })
			return err
		},
		UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			_, err := pass(ctx, p, func(cs *mcp.ClientSession) (mcp.Result, error) { return nil, cs.Unsubscribe(ctx, req.Params) })
			return err
		},
	})
	p.server.AddReceivingMiddleware(p.intercept)
	return p
}

// Done is closed once the proxy closes.
func (p *Proxy) Done() <-chan struct{} { return p.done }

// Server is the MCP server to run on the client's transport.
func (p *Proxy) Server() *mcp.Server { return p.server }

// Close ends the session's run and stops the server: the run blocked if a
// call's outcome is unknown, succeeded otherwise. It returns the run as
// committed (nil if no client initialized), every time it is called.
func (p *Proxy) Close() (*journal.Run, error) {
	p.closeOnce.Do(func() {
		close(p.done)
		p.readyOnce.Do(func() { close(p.ready) }) // nothing waits for a client that is gone
		p.mu.Lock()
		sess, ss := p.sess, p.ss
		p.sess = nil
		p.mu.Unlock()
		if ss != nil {
			// Calls still in flight are cancelled (journaled aborted, for
			// resume to judge) before the run ends.
			ss.Close()
		}
		if sess != nil {
			p.closedRun, p.closeErr = sess.Close()
		}
	})
	return p.closedRun, p.closeErr
}

// intercept answers what the proxy handles itself and passes the rest on.
func (p *Proxy) intercept(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			return p.initialize(ctx, next, req)
		case "tools/call":
			return p.call(ctx, req)
		case "tools/list":
			params, _ := req.GetParams().(*mcp.ListToolsParams)
			return p.tools(ctx, params)
		case "logging/setLevel":
			// The server logs at the client's level; go-sdk notes it too,
			// for the messages it passes on.
			params, _ := req.GetParams().(*mcp.SetLoggingLevelParams)
			if _, err := pass(ctx, p, func(cs *mcp.ClientSession) (mcp.Result, error) {
				return nil, cs.SetLoggingLevel(ctx, params)
			}); err != nil {
				return nil, err
			}
		}
		if send, ok := passed[method]; ok {
			return pass(ctx, p, func(cs *mcp.ClientSession) (mcp.Result, error) { return send(ctx, cs, req.GetParams()) })
		}
		return next(ctx, method, req)
	}
}

// passed are the requests that go to the server as they came, answered
// with its answer.
var passed = map[string]func(context.Context, *mcp.ClientSession, mcp.Params) (mcp.Result, error){
	"prompts/list":             relay((*mcp.ClientSession).ListPrompts),
	"prompts/get":              relay((*mcp.ClientSession).GetPrompt),
	"resources/list":           relay((*mcp.ClientSession).ListResources),
	"resources/templates/list": relay((*mcp.ClientSession).ListResourceTemplates),
	"resources/read":           relay((*mcp.ClientSession).ReadResource),
	"completion/complete":      relay((*mcp.ClientSession).Complete),
}

// relay is send, a request of the session's, for params of any type.
func relay[P mcp.Params, R mcp.Result](send func(*mcp.ClientSession, context.Context, P) (R, error)) func(context.Context, *mcp.ClientSession, mcp.Params) (mcp.Result, error) {
	return func(ctx context.Context, cs *mcp.ClientSession, params mcp.Params) (mcp.Result, error) {
		typed, _ := params.(P)
		res, err := send(cs, ctx, typed)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
}

// initialize opens the session with what the client said of itself, then
// answers with the server's capabilities, information and instructions:
// the client sees the server it configured.
func (p *Proxy) initialize(ctx context.Context, next mcp.MethodHandler, req mcp.Request) (mcp.Result, error) {
	params, _ := req.GetParams().(*mcp.InitializeParams)
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if params == nil || ss == nil {
		return next(ctx, "initialize", req)
	}
	p.mu.Lock()
	again := p.ss != nil
	if !again {
		p.ss, p.caps, p.proto = ss, params.Capabilities, params.ProtocolVersion
	}
	p.mu.Unlock()
	if again {
		// A second initialize on the session: go-sdk answers it (its
		// error); the session stays the one the first opened.
		return next(ctx, "initialize", req)
	}
	// The session ends when the client's does: over HTTP, by a DELETE or
	// its idle timeout. The goroutine is the proxy's; Close is safe to
	// call again.
	go func() {
		ss.Wait()
		p.Close()
	}()
	info := params.ClientInfo
	if info == nil {
		info = &mcp.Implementation{}
	}
	sess, err := p.open(ctx, info, peer{p})
	p.mu.Lock()
	p.sess, p.err = sess, err
	close(p.opened)
	p.mu.Unlock()
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpflow proxy: " + err.Error()}
	}
	res, err := next(ctx, "initialize", req)
	if err != nil {
		return res, err
	}
	if ir, ok := res.(*mcp.InitializeResult); ok {
		if up, err := sess.Upstream(ctx); err == nil {
			if u := up.Initialized(); u != nil {
				ir.Capabilities = u.Capabilities
				ir.Instructions = u.Instructions
				ir.ServerInfo = u.ServerInfo
			}
		}
	}
	return res, nil
}

// session waits for the session the client's initialize opens.
func (p *Proxy) session(ctx context.Context) (Session, error) {
	select {
	case <-p.opened:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	if p.sess == nil {
		return nil, errors.New("the session has ended")
	}
	return p.sess, nil
}

// pass sends a request that is not a tools/call to the server as it came.
// Such a request is a read or a listing: on a lost connection it is sent
// once more on a new one.
func pass[R mcp.Result](ctx context.Context, p *Proxy, send func(cs *mcp.ClientSession) (R, error)) (mcp.Result, error) {
	sess, err := p.session(ctx)
	if err != nil {
		return nil, err
	}
	up, err := sess.Upstream(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	res, err := send(up.Client())
	if err != nil && ctx.Err() == nil && lost(upstream.Classify(err)) {
		if up, err = sess.Reconnect(ctx, up); err != nil {
			return nil, unavailable(err)
		}
		res, err = send(up.Client())
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func unavailable(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpflow proxy: the server is unavailable: " + err.Error()}
}

// tools lists the server's tools, without those its entry in the
// configuration leaves out (they are never called).
func (p *Proxy) tools(ctx context.Context, params *mcp.ListToolsParams) (mcp.Result, error) {
	res, err := pass(ctx, p, func(cs *mcp.ClientSession) (*mcp.ListToolsResult, error) { return cs.ListTools(ctx, params) })
	if err != nil {
		return nil, err
	}
	lt := res.(*mcp.ListToolsResult)
	sess, err := p.session(ctx)
	if err != nil {
		return nil, err
	}
	up, err := sess.Upstream(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	kept := lt.Tools[:0]
	for _, t := range lt.Tools {
		if ok, _ := up.Server().Allows(t.Name); ok {
			kept = append(kept, t)
		}
	}
	lt.Tools = kept
	return lt, nil
}

// call is one tools/call: a step of the session's run.
func (p *Proxy) call(ctx context.Context, req mcp.Request) (mcp.Result, error) {
	params, _ := req.GetParams().(*mcp.CallToolParamsRaw)
	if params == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call without params"}
	}
	sess, err := p.session(ctx)
	if err != nil {
		return nil, err
	}
	args := params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	fw := &engine.Forward{Meta: params.Meta}
	if token := params.GetProgressToken(); token != nil {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		fw.Progress = func(progress, total float64, message string) {
			if ss != nil {
				ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: message})
			}
		}
	}
	p.mu.Lock()
	p.seq++
	n := p.seq
	p.calls[n] = ctx
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.calls, n)
		p.mu.Unlock()
	}()
	a, err := sess.Call(ctx, params.Name, args, fw)
	if err != nil && !fw.Sent() && ctx.Err() == nil {
		// The journal failed before the call was sent (the process it
		// was written through is gone): the call is made once the
		// journal is found again.
		sess.Refind(ctx)
		fw = &engine.Forward{Meta: fw.Meta, Progress: fw.Progress}
		a, err = sess.Call(ctx, params.Name, args, fw)
	}
	if err != nil && fw.Sent() {
		// Sent, and its outcome could not be journaled: the client is
		// told what the journal will say once settled — it may have run.
		return OutcomeUnknown(fw.Invocation()), nil
	}
	if err != nil {
		// The journal failed before the call was sent: it did not run.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpflow proxy: the journal could not be written, the call was not sent: " + err.Error()}
	}
	return answer(a)
}

// answer is what the client receives for a call that ended as a says.
func answer(a engine.Answer) (mcp.Result, error) {
	switch {
	case a.Result != nil:
		return a.Result, nil
	case a.State == journal.StateOutcomeUnknown, a.State == journal.StateTimedOut, a.State == journal.StateAborted:
		// Timed out or cancelled in flight, it may have run: the client
		// must not take it for a failure to try again.
		return OutcomeUnknown(a.Invocation), nil
	}
	var rpc *jsonrpc.Error
	if errors.As(a.Failure, &rpc) {
		return nil, rpc // the server's own answer
	}
	code := int64(jsonrpc.CodeInternalError)
	if a.Err != nil && (a.Err.Code == engine.CodeUnknownTool || a.Err.Code == engine.CodeInvalidArguments) {
		code = jsonrpc.CodeInvalidParams
	}
	msg := "the call failed"
	if a.Err != nil {
		// The client named no step: the message says what went wrong.
		msg = strings.TrimPrefix(a.Err.Message, "step "+a.Step+": ")
	}
	return nil, &jsonrpc.Error{Code: code, Message: msg}
}

// OutcomeUnknown is the tool error a client receives for a call that may
// have run and will not be sent again: the stable text, the invocation an
// operator resolves, never the arguments nor anything the server said.
func OutcomeUnknown(inv journal.ID) *mcp.CallToolResult {
	text := fmt.Sprintf("%s: %s (invocation %s)", replay.Code, replay.Message, inv.Short())
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		Meta:    mcp.Meta{"mcpflow/code": replay.Code, "mcpflow/invocation": inv.String()},
	}
}

// peer is the client as the server's session sees it.
type peer struct{ p *Proxy }

func (c peer) client() *mcp.ServerSession {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.p.ss
}

func (c peer) Capabilities() *mcp.ClientCapabilities {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.p.caps
}

// on is the context to send what the server asks or says with: that of
// the client's one tools/call in flight, so that it travels with the call
// (over HTTP, on the call's own response stream), cancelled with the
// server's request (ctx). With none or several in flight, the protocol does
// not say which call it belongs to: it goes as the client's session's own.
func (c peer) on(ctx context.Context) (context.Context, context.CancelFunc) {
	select {
	case <-c.p.ready:
	case <-ctx.Done():
	}
	c.p.mu.Lock()
	var call context.Context
	if len(c.p.calls) == 1 {
		for _, cc := range c.p.calls {
			call = cc
		}
	}
	c.p.mu.Unlock()
	if call == nil {
		return ctx, func() {}
	}
	out, cancel := context.WithCancel(context.WithoutCancel(call))
	stop := context.AfterFunc(ctx, cancel)
	return out, func() { stop(); cancel() }
}

func (c peer) ProtocolVersion() string {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.p.proto
}

func (c peer) Elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	ctx, done := c.on(ctx)
	defer done()
	return c.client().Elicit(ctx, params)
}

func (c peer) CreateMessage(ctx context.Context, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	ctx, done := c.on(ctx)
	defer done()
	return c.client().CreateMessage(ctx, params)
}

func (c peer) ListRoots(ctx context.Context, params *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	if params == nil {
		params = &mcp.ListRootsParams{}
	}
	ctx, done := c.on(ctx)
	defer done()
	return c.client().ListRoots(ctx, params)
}

// Notify passes a notification of the server on. go-sdk sends a list
// change only when its own registry changes: the proxy, which answers
// lists from the server, touches the registry (a placeholder added and
// removed, never listed) to have it announce the server's change.
func (c peer) Notify(ctx context.Context, method string, params mcp.Params) {
	ss := c.client()
	if ss == nil {
		return
	}
	s := c.p.server
	ctx, done := c.on(ctx)
	defer done()
	switch method {
	case "notifications/message":
		if p, ok := params.(*mcp.LoggingMessageParams); ok && p != nil {
			ss.Log(ctx, p)
		}
	case "notifications/progress":
		if p, ok := params.(*mcp.ProgressNotificationParams); ok && p != nil {
			ss.NotifyProgress(ctx, p)
		}
	case "notifications/elicitation/complete":
		if p, ok := params.(*mcp.ElicitationCompleteParams); ok && p != nil {
			ss.NotifyElicitationComplete(ctx, p)
		}
	case "notifications/resources/updated":
		if p, ok := params.(*mcp.ResourceUpdatedNotificationParams); ok && p != nil {
			s.ResourceUpdated(ctx, p)
		}
	case "notifications/tools/list_changed":
		s.AddTool(&mcp.Tool{Name: placeholder, InputSchema: map[string]any{"type": "object"}}, nil)
		s.RemoveTools(placeholder)
	case "notifications/prompts/list_changed":
		s.AddPrompt(&mcp.Prompt{Name: placeholder}, nil)
		s.RemovePrompts(placeholder)
	case "notifications/resources/list_changed":
		s.AddResource(&mcp.Resource{Name: placeholder, URI: "mcpflow-proxy:" + placeholder}, nil)
		s.RemoveResources("mcpflow-proxy:" + placeholder)
	}
}

// placeholder names what the proxy adds to go-sdk's registry to announce
// a list change; lists are answered by the server, so it is never seen.
const placeholder = "mcpflow-proxy-list-changed"

// lost reports whether a request failed because the connection was lost.
func lost(c replay.Class) bool { return c == replay.ClassLost || c == replay.ClassNotDelivered }

// handshakeVersions are the protocol versions the proxy speaks: those
// before 2026-07-28, every one opened by initialize. On 2026-07-28 a
// client may skip initialize, and a server asks for input in a call's
// result (input_required) for the client to continue the call: the proxy
// does not pass that on yet, so it offers neither, and asks its server for
// the version its client asked for (see upstream.Peer).
func handshakeVersions() []string {
	var vs []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < "2026-07-28" {
			vs = append(vs, v)
		}
	}
	return vs
}
