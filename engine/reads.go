package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// A step with resource: or prompt: sends a resources/read or a prompts/get
// instead of a tools/call (its journal.Method). It goes through the same
// attempt loop, journaled the same way — intent before the send, outcome
// after — with three differences:
//
//   - there is no tool to discover or to check arguments against: the
//     server answers an unknown resource or prompt, or missing arguments,
//     with a rejection (it did not run);
//   - the replay rule clears sending it again after a lost connection (or
//     a crash, an abort, a timeout) whatever trust and annotations say: it
//     changes nothing (replay.View.Read). Its replay budget still bounds
//     it, and a read whose budget is spent fails: it has no outcome to be
//     unknown about (notCleared);
//   - its result is the request's (readValue, promptValue).

// Reader is what a read step needs of a Session besides Call: MCP's
// sessions read. Read and GetPrompt take the Intent that the journal's
// Begin or Again returned, as Call does.
type Reader interface {
	Read(ctx context.Context, in journal.Intent, uri string) (*mcp.ReadResourceResult, error)
	GetPrompt(ctx context.Context, in journal.Intent, name string, args map[string]string) (*mcp.GetPromptResult, error)
}

var _ Reader = mcpSession{}

func (m mcpSession) Read(ctx context.Context, in journal.Intent, uri string) (*mcp.ReadResourceResult, error) {
	meta, err := m.meta(ctx, in)
	if err != nil {
		return nil, err
	}
	return m.s.ReadResource(ctx, uri, meta)
}

func (m mcpSession) GetPrompt(ctx context.Context, in journal.Intent, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	meta, err := m.meta(ctx, in)
	if err != nil {
		return nil, err
	}
	return m.s.GetPrompt(ctx, name, args, meta)
}

// meta is the _meta of a request sent for in: its idempotency key and the
// trace context. An Intent that is not durable is refused.
func (m mcpSession) meta(ctx context.Context, in journal.Intent) (map[string]any, error) {
	if !in.Valid() {
		return nil, ErrNoIntent
	}
	meta := map[string]any{MetaIdempotencyKey: in.IdempotencyKey}
	injectMeta(ctx, meta)
	return meta, nil
}

// answer is what came back for one attempt's request, whatever its
// method, as the journal keeps it: a tool's content and structured
// content and whether it is a tool error; a read's or a prompt's result
// as structured (see journal.Result).
type answer struct {
	content, structured json.RawMessage
	isError             bool
	// call is a tools/call's result as it came (with its input requests,
	// on protocol 2026-07-28); nil for a read.
	call *mcp.CallToolResult
}

// request sends one attempt's request: the tools/call, resources/read or
// prompts/get of the unit, with args as evalArgs made them.
func (r *runner) request(ctx context.Context, u unit, sess Session, intent journal.Intent, args json.RawMessage, progress func(float64, float64, string)) (*answer, error) {
	if m := u.Method(); m.Reads() {
		rd, ok := sess.(Reader)
		if !ok {
			// Never sent: begin checks this before the intent, so only a
			// session swapped by a reconnect gets here.
			return nil, fmt.Errorf("%w: session %T does not read resources or get prompts", mcp.ErrConnectionClosed, sess)
		}
		if m == journal.MethodRead {
			res, err := rd.Read(ctx, intent, uriOf(args))
			if err != nil {
				return nil, err
			}
			b, err := json.Marshal(struct {
				Contents []*mcp.ResourceContents `json:"contents"`
			}{res.Contents})
			return &answer{structured: b}, err
		}
		var p map[string]string
		json.Unmarshal(args, &p)
		res, err := rd.GetPrompt(ctx, intent, u.Prompt, p)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(struct {
			Description string               `json:"description,omitempty"`
			Messages    []*mcp.PromptMessage `json:"messages"`
		}{res.Description, res.Messages})
		return &answer{structured: b}, err
	}
	// A server may ask a question while the call runs: r.asker answers.
	res, err := sess.Call(upstream.WithAsker(ctx, r.asker(ctx, u, intent)), intent, u.Tool, args, progress)
	if err != nil {
		return nil, err
	}
	content, structured := resultJSON(res)
	return &answer{content: content, structured: structured, isError: res.IsError, call: res}, nil
}

// readArgs are the arguments of a read step, as they are journaled and
// digested: a resources/read's params ({"uri": …}), a prompts/get's
// arguments (strings).
func (r *runner) readArgs(ctx context.Context, u unit) (json.RawMessage, *stepResult) {
	fail := func(format string, args ...any) (json.RawMessage, *stepResult) {
		out := failed(CodeExpression, "step %s: "+format, append([]any{u.name()}, args...)...)
		return nil, &out
	}
	if u.Method() == journal.MethodRead {
		v, err := u.Resource.Eval(ctx, r.vars(u))
		if err != nil {
			return fail("resource: %v", err)
		}
		uri, ok := v.(string)
		if !ok || strings.TrimSpace(uri) == "" {
			return fail("resource: the URI evaluates to %s, not a string", api.OneLine(workflow.Text(v), 80))
		}
		b, err := json.Marshal(map[string]string{"uri": uri})
		if err != nil {
			return fail("resource: %v", err)
		}
		return b, nil
	}
	var v any = map[string]any{}
	if u.With != nil {
		var err error
		if v, err = u.With.Eval(ctx, r.vars(u)); err != nil {
			return fail("%v", err)
		}
	}
	args, err := workflow.PromptArguments(v)
	if err != nil {
		return fail("%v", err)
	}
	b, err := json.Marshal(args)
	if err != nil {
		return fail("arguments are not JSON: %v", err)
	}
	return b, nil
}

// uriOf is the URI of a resources/read's params.
func uriOf(args json.RawMessage) string {
	var p struct {
		URI string `json:"uri"`
	}
	json.Unmarshal(args, &p)
	return p.URI
}

// rediscover lists the unit's tool again, after a reconnect or before a
// retry. A read has no tool: it gets the zero Tool, and the rule asks
// nothing of it.
func rediscover(ctx context.Context, u unit, sess Session) (upstream.Tool, error) {
	if u.Method().Reads() {
		return upstream.Tool{}, nil
	}
	return sess.Tool(ctx, u.Tool)
}

// notCleared is how an invocation ends when the replay rule does not clear
// sending it again (the decision is journaled with it): its outcome is
// unknown and the run is blocked until an operator resolves it. A read
// changed nothing, so the rule stops one only when its replay budget is
// spent, and it then fails: there is no outcome to be unknown about.
func notCleared(inv *journal.Invocation) (journal.State, *journal.Error, *stepResult) {
	m := inv.Method
	if !m.Reads() {
		return journal.StateOutcomeUnknown, outcomeUnknown, blocked(inv.ID)
	}
	step := unit{Step: &workflow.Step{ID: inv.Step}, item: inv.Item}.name()
	e := &journal.Error{Code: CodeServerUnavailable, Message: fmt.Sprintf("step %s: %s: the connection to server %s broke on every try, %d replays spent; a %s changes nothing, so an operator's retry may send it again",
		step, requestText(m, inv.Tool), inv.Server, replay.MaxReplays, m)}
	return journal.StateFailed, e, &stepResult{status: journal.RunFailed, err: e, invocation: inv.ID, state: journal.StateFailed}
}

// requestText names a request for people: "tool greet", "resource
// file:///x", "prompt review".
func requestText(m journal.Method, target string) string {
	switch m {
	case journal.MethodRead:
		return "resource " + target
	case journal.MethodPrompt:
		return "prompt " + target
	}
	return "tool " + target
}

// readValue is what expressions see of a resources/read's result (its
// journaled structured form): contents, the list of the resource's
// contents as sent ({uri, mimeType, text} or {uri, mimeType, blob}, the
// blob in base64), and text, the texts of those that have one joined by
// newlines.
func readValue(structured json.RawMessage) map[string]any {
	v := newValue(false, false)
	var res struct {
		Contents []any `json:"contents"`
	}
	v["contents"] = []any{}
	if json.Unmarshal(structured, &res) != nil || res.Contents == nil {
		return v
	}
	v["contents"] = res.Contents
	v["text"] = api.ResultText(journal.MethodRead, nil, structured)
	return v
}

// promptValue is what expressions see of a prompts/get's result (its
// journaled structured form): description, messages as sent ({role,
// content}), and text, the text contents of the messages joined by
// newlines.
func promptValue(structured json.RawMessage) map[string]any {
	v := newValue(false, false)
	var res struct {
		Description string `json:"description"`
		Messages    []any  `json:"messages"`
	}
	v["description"], v["messages"] = "", []any{}
	if json.Unmarshal(structured, &res) != nil {
		return v
	}
	v["description"] = res.Description
	if res.Messages == nil {
		return v
	}
	v["messages"] = res.Messages
	v["text"] = api.ResultText(journal.MethodPrompt, nil, structured)
	return v
}

// valueOf is what expressions see of a request's result, live or
// journaled, by its method.
func valueOf(m journal.Method, content, structured json.RawMessage, isError bool) map[string]any {
	switch m {
	case journal.MethodRead:
		return readValue(structured)
	case journal.MethodPrompt:
		return promptValue(structured)
	}
	return resultValue(content, structured, isError)
}
