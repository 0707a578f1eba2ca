package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/elicit"
	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
)

// CodeInputRequired blocks a run whose call asked for input nobody has
// given yet (an elicitation the step's elicit: does not answer): an
// operator answers it (mcpflow answer), and the call is continued.
const CodeInputRequired = "MCPFLOW_INPUT_REQUIRED"

// ByWorkflow is who answered an input request from the step's elicit:;
// ByMcpflow, one mcpflow answers from what it knows (roots/list: the
// session's roots).
const (
	ByWorkflow = "workflow"
	ByMcpflow  = "mcpflow"
)

// methodListRoots is the MCP method of a request for the client's roots.
const methodListRoots = "roots/list"

// inputRequired journals a result that asked for input (MCP
// multi-round-trip requests, input_required) as the attempt's outcome:
// the call stays in flight, decided to continue once every request is
// answered, with the answers the step gives itself (elicit:). When they
// cover every request the call is continued at once — another attempt,
// a continuation, not a replay: the tool has not run; otherwise the run
// waits for an operator's answers, and resume continues it.
func (r *runner) inputRequired(ctx context.Context, u unit, sess Session, intent journal.Intent, res *mcp.CallToolResult) (turn, error) {
	requests, err := json.Marshal(res.InputRequests)
	if err != nil {
		out := failed(CodeServerError, "step %s: the server asked for input this mcpflow cannot read: %v", u.name(), err)
		return r.inputFailed(intent, out, err)
	}
	in := &journal.Input{Requests: requests, State: res.RequestState}
	reqs, err := in.Parsed()
	if err != nil {
		out := failed(CodeServerError, "step %s: the server asked for input this mcpflow cannot read: %v", u.name(), err)
		return r.inputFailed(intent, out, err)
	}
	var why string // why the step's own answer was not given
	for _, q := range reqs {
		if q.Method == methodListRoots {
			// The session's own roots: what it declares to the server.
			if s := SessionOf(sess); s != nil {
				b, err := json.Marshal(s.Roots())
				if err != nil {
					return turn{}, err
				}
				in.Answers = append(in.Answers, journal.Answer{Key: q.Key, Response: b, By: ByMcpflow})
				continue
			}
		}
		resp, reason := r.answerItself(ctx, u, q)
		if resp == nil {
			if why == "" {
				why = reason
			}
			continue
		}
		in.Answers = append(in.Answers, journal.Answer{Key: q.Key, Response: resp, By: ByWorkflow})
	}
	d := &journal.Decision{Verdict: verdict.Continue, Reason: "input_required", View: verdict.Current}
	if err := r.j.Finish(intent, journal.Outcome{State: journal.StateIntent, Decision: d, Input: in}); err != nil {
		return turn{}, err
	}
	r.decided(ctx, d)
	if len(in.Answers) == len(reqs) {
		return another(&cause{kind: causeContinue}), nil
	}
	return ending(*waitsForInput(u, intent.ID, why)), nil
}

// inputFailed ends the step when the input asked for cannot be read: the
// server has not run the tool, so the invocation fails, and a resume may
// send it again.
func (r *runner) inputFailed(intent journal.Intent, out stepResult, cause error) (turn, error) {
	o := journal.Outcome{State: journal.StateFailed, Error: out.err, Failure: replay.ClassRejected, Detail: cause.Error()}
	if err := r.j.Finish(intent, o); err != nil {
		return turn{}, err
	}
	out.invocation, out.state = intent.ID, journal.StateFailed
	return ending(out), nil
}

// waitsForInput is the end of a step whose call waits for an operator's
// answers. The message names no server text: a question may quote the
// call's arguments, which the journal seals; runs show reads it.
func waitsForInput(u unit, id journal.ID, why string) *stepResult {
	msg := fmt.Sprintf("step %s waits for input the server asked for: answer it with mcpflow answer", u.name())
	if why != "" {
		msg += " (" + why + ")"
	}
	return &stepResult{status: journal.RunBlocked, err: &journal.Error{Code: CodeInputRequired, Message: msg}, invocation: id, state: journal.StateIntent}
}

// answerItself is the step's own answer to one input request, or nil and
// why there is none: an elicitation is answered by the step's elicit:,
// checked against the schema the server asked with.
func (r *runner) answerItself(ctx context.Context, u unit, q journal.InputRequest) (json.RawMessage, string) {
	if q.Method != elicit.Method {
		return nil, fmt.Sprintf("mcpflow does not answer %s for a step", q.Method)
	}
	if u.ElicitAction == "" {
		return nil, ""
	}
	question, err := elicit.Parse(q.Params)
	if err != nil {
		return nil, err.Error()
	}
	if question.Mode == "url" && u.ElicitAction == elicit.Accept {
		return nil, "a URL is for a person to open"
	}
	var content map[string]any
	if u.ElicitAction == elicit.Accept {
		v, err := u.Elicit.Eval(ctx, r.vars(u))
		if err != nil {
			return nil, fmt.Sprintf("elicit: %v", err)
		}
		content, _ = v.(map[string]any)
		if err := question.Check(content); err != nil {
			return nil, fmt.Sprintf("elicit: %v", err)
		}
	}
	resp, err := elicit.Response(u.ElicitAction, content)
	if err != nil {
		return nil, err.Error()
	}
	return resp, ""
}

// inputWaits reports whether inv waits for answers nobody has given.
func inputWaits(inv *journal.Invocation) bool {
	w := inv.WaitingInput()
	if w == nil {
		return false
	}
	open, err := w.Unanswered()
	return err != nil || len(open) > 0
}

// asker answers the elicitations a server sends during an attempt's call
// (protocols without multi-round-trip requests): each question is
// journaled with the attempt, answered by the step's elicit: at once, or
// else by an operator (mcpflow answer), waited for with the call open and
// bounded by callCtx (the step's timeout, a cancel). A crash meanwhile is
// a lost connection like any other, under the replay rule.
func (r *runner) asker(callCtx context.Context, u unit, intent journal.Intent) upstream.Asker {
	var n atomic.Int64
	return func(_ context.Context, p *mcp.ElicitParams, completed <-chan struct{}) (*mcp.ElicitResult, error) {
		params, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		key := fmt.Sprintf("elicitation-%d", n.Add(1))
		q := journal.InputRequest{Key: key, Method: elicit.Method, Params: params}
		requests, err := json.Marshal(map[string]journal.InputRequest{key: q})
		if err != nil {
			return nil, err
		}
		in := journal.Input{Requests: requests}
		resp, why := r.answerItself(callCtx, u, q)
		if resp != nil {
			in.Answers = []journal.Answer{{Key: key, Response: resp, By: ByWorkflow}}
		}
		if err := r.j.Ask(intent.ID, intent.Attempt, in); err != nil {
			return nil, err
		}
		if resp == nil {
			msg := fmt.Sprintf("waits for an answer: mcpflow answer %s %s", r.run.ID.Short(), u.ID)
			if p.URL != "" {
				msg = fmt.Sprintf("waits for a person to open %s: mcpflow answer %s %s --done once finished", p.URL, r.run.ID.Short(), u.ID)
			}
			if why != "" {
				msg += " (" + why + ")"
			}
			r.emit(Event{Kind: StepProgress, Run: r.run.ID, Step: u.ID, Item: u.item, Invocation: intent.ID, Attempt: intent.Attempt, Message: msg})
			if resp, err = r.awaitAnswer(callCtx, intent, key, completed); err != nil {
				return nil, err
			}
		}
		var res mcp.ElicitResult
		if err := json.Unmarshal(resp, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
}

// answerPoll is how often a call waiting for an operator's answer reads
// the journal for it.
const answerPoll = 100 * time.Millisecond

// ByServer is who answered a URL elicitation that its server said is
// complete (notifications/elicitation/complete).
const ByServer = "server"

// awaitAnswer waits until the answer to request key of intent's attempt
// is journaled, or, for a URL elicitation, completed is closed (the
// answer is then journaled as accepted, by the server), or ctx ends.
func (r *runner) awaitAnswer(ctx context.Context, intent journal.Intent, key string, completed <-chan struct{}) (json.RawMessage, error) {
	t := time.NewTicker(answerPoll)
	defer t.Stop()
	for {
		inv, err := r.j.Invocation(intent.ID)
		if err != nil {
			return nil, err
		}
		for _, in := range inv.Inputs {
			if a := in.Answer(key); in.Attempt == intent.Attempt && a != nil {
				return a.Response, nil
			}
		}
		select {
		case <-t.C:
		case <-completed:
			resp, err := elicit.Response(elicit.Accept, nil)
			if err != nil {
				return nil, err
			}
			_, err = r.j.Answer(intent.ID, intent.Attempt, []journal.Answer{{Key: key, Response: resp, By: ByServer}})
			if err != nil && !errors.Is(err, journal.ErrTransition) { // an operator's came first
				return nil, err
			}
			completed = nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
