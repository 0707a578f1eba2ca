package upstream

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Peer is the client a session stands in for (mcpflow proxy): what the
// server asks of its client — elicitation, sampling, roots — goes to the
// peer, and what the server announces — log messages, list changes,
// resource updates, progress of a request the peer made — reaches it too.
// A session with a peer declares the capabilities the peer declared, no
// more.
type Peer interface {
	// Capabilities are the capabilities the peer declared at initialize.
	Capabilities() *mcp.ClientCapabilities
	// ProtocolVersion is the protocol version the peer asked for: the
	// session asks the server for it too, so that both speak alike (a
	// server on 2026-07-28 may not ask during a call, one on 2025-11-25
	// may).
	ProtocolVersion() string
	Elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error)
	CreateMessage(ctx context.Context, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	ListRoots(ctx context.Context, params *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
	// Notify passes a notification of the server on, as it came.
	Notify(ctx context.Context, method string, params mcp.Params)
}

// peerCapabilities is what a session with peer p declares: the peer's
// roots, sampling and elicitation, each only if the peer declared it.
func peerCapabilities(p Peer) *mcp.ClientCapabilities {
	caps := &mcp.ClientCapabilities{}
	pc := p.Capabilities()
	if pc == nil {
		return caps
	}
	if pc.RootsV2 != nil {
		caps.RootsV2 = &mcp.RootCapabilities{ListChanged: pc.RootsV2.ListChanged}
	}
	caps.Sampling = pc.Sampling
	caps.Elicitation = pc.Elicitation
	caps.Experimental, caps.Extensions = pc.Experimental, pc.Extensions
	return caps
}

// peerOptions sets the client options of a session with peer p: every
// request of the server goes to the peer, every notification is passed on
// after the session took what it needs from it.
func (s *Session) peerOptions(p Peer, o *mcp.ClientOptions) {
	o.Capabilities = peerCapabilities(p)
	// go-sdk declares elicitation whenever a handler is set: set only
	// when the peer declared it.
	o.ElicitationHandler, o.ElicitationCompleteHandler = nil, nil
	if o.Capabilities.Elicitation != nil {
		o.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return p.Elicit(ctx, req.Params)
		}
		o.ElicitationCompleteHandler = func(ctx context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			p.Notify(ctx, "notifications/elicitation/complete", req.Params)
		}
	}
	o.CreateMessageHandler = nil
	if o.Capabilities.Sampling != nil {
		o.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return p.CreateMessage(ctx, req.Params)
		}
	}
	stale := o.ToolListChangedHandler
	o.ToolListChangedHandler = func(ctx context.Context, req *mcp.ToolListChangedRequest) {
		stale(ctx, req)
		p.Notify(ctx, "notifications/tools/list_changed", req.Params)
	}
	o.PromptListChangedHandler = func(ctx context.Context, req *mcp.PromptListChangedRequest) {
		p.Notify(ctx, "notifications/prompts/list_changed", req.Params)
	}
	o.ResourceListChangedHandler = func(ctx context.Context, req *mcp.ResourceListChangedRequest) {
		p.Notify(ctx, "notifications/resources/list_changed", req.Params)
	}
	o.ResourceUpdatedHandler = func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		p.Notify(ctx, "notifications/resources/updated", req.Params)
	}
	logged := o.LoggingMessageHandler
	o.LoggingMessageHandler = func(ctx context.Context, req *mcp.LoggingMessageRequest) {
		logged(ctx, req)
		p.Notify(ctx, "notifications/message", req.Params)
	}
	mine := o.ProgressNotificationHandler
	o.ProgressNotificationHandler = func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
		s.mu.Lock()
		_, ours := s.progress[req.Params.ProgressToken]
		s.mu.Unlock()
		if ours {
			mine(ctx, req) // a call of the engine's: it forwards what it wants
			return
		}
		p.Notify(ctx, "notifications/progress", req.Params)
	}
}

// peerRequests hands the server's requests to the peer as they came: an
// elicitation without go-sdk's own checks of its schema (the client
// checks what it shows; go-sdk v1.8.0 refuses schemas the specification
// allows, such as SEP-1330's titled multi-select), and roots/list with the
// peer's roots when the peer declared roots — otherwise go-sdk's answer
// (the session's roots) stands.
func peerRequests(p Peer) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "elicitation/create":
				if c := p.Capabilities(); c == nil || c.Elicitation == nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the client declared no elicitation"}
				}
				params, _ := req.GetParams().(*mcp.ElicitParams)
				return p.Elicit(ctx, params)
			case "roots/list":
				if c := p.Capabilities(); c == nil || c.RootsV2 == nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the client declared no roots"}
				}
				params, _ := req.GetParams().(*mcp.ListRootsParams)
				return p.ListRoots(ctx, params)
			}
			return next(ctx, method, req)
		}
	}
}

// Initialized is the server's answer to initialize: its capabilities,
// information and instructions.
func (s *Session) Initialized() *mcp.InitializeResult { return s.cs.InitializeResult() }

// Client is the go-sdk session under s, for requests a proxy passes on as
// they came (lists, reads, prompts, completions, subscriptions). A
// tools/call never goes through it: calls are journaled (Session.Call).
func (s *Session) Client() *mcp.ClientSession { return s.cs }
