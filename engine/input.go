package engine

import (
	"cmp"
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
	approvals := map[string]journal.InputRequest{}
	for _, q := range reqs {
		if q.Method == upstream.MethodListRoots {
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
		if q.Method == upstream.MethodCreateMessage {
			switch {
			case r.e.Sample == nil:
				out := failed(CodeServerError, "step %s: the server asked for sampling, and no provider is configured (a sampling: section in mcpflow.yaml); the tool did not run", u.name())
				return r.inputFailed(intent, out, errors.New("sampling asked of a client without a provider"))
			case r.e.SampleApprove:
				// Asked of an operator beside it; answered by the provider
				// once approved (fulfil, before the continuation).
				approvals[q.Key+ApprovalSuffix] = journal.InputRequest{Method: MethodApprove, Params: approvalParams}
				if why == "" {
					why = "a sampling request waits for approval: --approve"
				}
				continue
			}
			var p mcp.CreateMessageParams
			if err := json.Unmarshal(q.Params, &p); err != nil {
				return r.inputFailed(intent, failed(CodeServerError, "step %s: the server's sampling request is not one: %v", u.name(), err), err)
			}
			res, err := r.e.Sample(ctx, u.Server, &p)
			if err != nil {
				return r.inputFailed(intent, failed(CodeServerError, "step %s: the sampling provider failed: %v; the tool did not run", u.name(), err), err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				return turn{}, err
			}
			in.Answers = append(in.Answers, journal.Answer{Key: q.Key, Response: b, By: ByProvider})
			continue
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
	if len(approvals) > 0 {
		// The server's requests and mcpflow's own approvals, in one object.
		var all map[string]json.RawMessage
		if err := json.Unmarshal(requests, &all); err != nil {
			return turn{}, err
		}
		for k, v := range approvals {
			b, _ := json.Marshal(v)
			all[k] = b
		}
		if in.Requests, err = json.Marshal(all); err != nil {
			return turn{}, err
		}
	}
	d := &journal.Decision{Verdict: verdict.Continue, Reason: "input_required", View: verdict.Current}
	if err := r.j.Finish(intent, journal.Outcome{State: journal.StateIntent, Decision: d, Input: in}); err != nil {
		return turn{}, err
	}
	r.decided(ctx, d)
	if len(in.Answers) == len(reqs) && len(approvals) == 0 {
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
		// The fields elicit: leaves out take the schema's defaults.
		if content, err = question.WithDefaults(content); err != nil {
			return nil, fmt.Sprintf("elicit: %v", err)
		}
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

// inputWaits reports whether inv waits for answers only a person can
// give (WaitsForPerson).
func inputWaits(inv *journal.Invocation) bool {
	w := inv.WaitingInput()
	if w == nil {
		return false
	}
	return len(WaitsForPerson(w)) > 0
}

// WaitsForPerson lists the keys of in's requests a person must answer:
// the unanswered ones but sampling requests, which mcpflow sends to the
// provider itself (once their approval, a request of its own, is given).
func WaitsForPerson(in *journal.Input) []string {
	reqs, err := in.Parsed()
	if err != nil {
		return []string{"(unreadable)"}
	}
	var out []string
	for _, q := range reqs {
		if in.Answer(q.Key) != nil {
			continue
		}
		if q.Method == upstream.MethodCreateMessage {
			continue // mcpflow sends it to the provider (once approved)
		}
		out = append(out, q.Key)
	}
	return out
}

// asker answers what a server asks during an attempt's call (protocols
// without multi-round-trip requests): each question is journaled with the
// attempt. An elicitation is answered by the step's elicit: at once, or
// else by an operator (mcpflow answer); a sampling request by the
// provider, after an operator's approval when sampling asks for one. The
// call stays open meanwhile, bounded by callCtx (the step's timeout, a
// cancel); a crash is a lost connection like any other, under the replay
// rule.
func (r *runner) asker(callCtx context.Context, u unit, intent journal.Intent) *upstream.Asker {
	var n atomic.Int64
	a := &upstream.Asker{Elicit: func(_ context.Context, p *mcp.ElicitParams, completed <-chan struct{}) (*mcp.ElicitResult, error) {
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
	}}
	if r.e.Sample != nil {
		a.Sample = func(_ context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			params, err := json.Marshal(p)
			if err != nil {
				return nil, err
			}
			key := fmt.Sprintf("sampling-%d", n.Add(1))
			reqs := map[string]journal.InputRequest{key: {Method: upstream.MethodCreateMessage, Params: params}}
			if r.e.SampleApprove {
				reqs[key+ApprovalSuffix] = journal.InputRequest{Method: MethodApprove, Params: approvalParams}
			}
			requests, err := json.Marshal(reqs)
			if err != nil {
				return nil, err
			}
			if err := r.j.Ask(intent.ID, intent.Attempt, journal.Input{Requests: requests}); err != nil {
				return nil, err
			}
			if r.e.SampleApprove {
				r.emit(Event{Kind: StepProgress, Run: r.run.ID, Step: u.ID, Item: u.item, Invocation: intent.ID, Attempt: intent.Attempt,
					Message: fmt.Sprintf("waits for approval to send the server's sampling request: mcpflow answer %s %s --approve", r.run.ID.Short(), u.ID)})
				resp, err := r.awaitAnswer(callCtx, intent, key+ApprovalSuffix, nil)
				if err != nil {
					return nil, err
				}
				if !approved(resp) {
					return nil, errSamplingDeclined
				}
			}
			return r.sample(callCtx, u, intent.ID, intent.Attempt, key, p)
		}
	}
	return a
}

// The approval mcpflow asks of an operator before it sends a sampling
// request to the provider (sampling: approve: true), journaled as a
// request of its own beside it, under the sampling request's key and
// ApprovalSuffix.
const (
	MethodApprove  = "mcpflow/approve"
	ApprovalSuffix = ".approval"
)

// approvalParams is the question of a sampling approval.
var approvalParams = json.RawMessage(`{"message":"Send the server's sampling request to the provider?"}`)

// ByProvider is who answered a sampling request: the provider.
const ByProvider = "sampling provider"

// errSamplingDeclined is what a server is told of a sampling request an
// operator declined.
var errSamplingDeclined = errors.New("an operator declined to send this sampling request to the provider")

// approved reports whether an approval's answer accepts.
func approved(resp json.RawMessage) bool {
	var r struct{ Action string }
	return json.Unmarshal(resp, &r) == nil && r.Action == elicit.Accept
}

// sample sends a sampling request to the provider and journals its answer
// (sealed like every payload) as the answer to request key of attempt.
// A provider's failure is the server's to hear, and is not journaled as
// an answer: the request stands asked.
func (r *runner) sample(ctx context.Context, u unit, id journal.ID, attempt int, key string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	res, err := r.e.Sample(ctx, u.Server, p)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if _, err := r.j.Answer(id, attempt, []journal.Answer{{Key: key, Response: b, By: ByProvider}}); err != nil {
		return nil, err
	}
	return res, nil
}

// A call waiting for an operator's answer reads the journal for it after
// answerPoll, then twice as long after each read that found none, up to
// answerPollMost: an answer given at once is taken at once, and a server
// holding thousands of calls that wait (for hours, say) does not read each
// ten times a second (33,000 reads a second for 3,333 of them). An answer
// journaled in this process wakes the call at once (answerTeller): on a
// journal no other process writes (the bbolt file), the reads are then
// only a safety net, up to answerPollQuiet apart.
const (
	answerPoll      = 100 * time.Millisecond
	answerPollMost  = time.Second
	answerPollQuiet = 30 * time.Second
)

// answerTeller is a journal that tells the calls of this process that
// wait for an answer when one is journaled (journal.Writer.AnswerGiven).
type answerTeller interface {
	AnswerGiven(journal.ID) (given <-chan struct{}, stop func())
}

// ByServer is who answered a URL elicitation that its server said is
// complete (notifications/elicitation/complete).
const ByServer = "server"

// awaitAnswer waits until the answer to request key of intent's attempt
// is journaled, or, for a URL elicitation, completed is closed (the
// answer is then journaled as accepted, by the server), or ctx ends.
func (r *runner) awaitAnswer(ctx context.Context, intent journal.Intent, key string, completed <-chan struct{}) (json.RawMessage, error) {
	teller, _ := r.j.Journal.(answerTeller)
	most := answerPollMost
	if _, shared := r.j.Journal.(journal.Shared); teller != nil && !shared {
		most = answerPollQuiet
	}
	wait := cmp.Or(r.answerPoll, answerPoll)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		var given <-chan struct{} // nil: only the reads find the answer
		stop := func() {}
		if teller != nil {
			// Before the read: an answer journaled after it is told.
			given, stop = teller.AnswerGiven(intent.ID)
		}
		resp, err := r.answerIn(intent, key)
		if err != nil || resp != nil {
			stop()
			return resp, err
		}
		select {
		case <-given:
		case <-t.C:
			wait = min(2*wait, most)
			t.Reset(wait)
		case <-completed:
			completed = nil
			resp, err := elicit.Response(elicit.Accept, nil)
			if err == nil {
				_, err = r.j.Answer(intent.ID, intent.Attempt, []journal.Answer{{Key: key, Response: resp, By: ByServer}})
			}
			if err != nil && !errors.Is(err, journal.ErrTransition) { // an operator's came first
				stop()
				return nil, err
			}
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		}
		stop()
	}
}

// answerIn is the answer journaled to request key of intent's attempt,
// nil when there is none yet.
func (r *runner) answerIn(intent journal.Intent, key string) (json.RawMessage, error) {
	inv, err := r.j.Invocation(intent.ID)
	if err != nil {
		return nil, err
	}
	for _, in := range inv.Inputs {
		if a := in.Answer(key); in.Attempt == intent.Attempt && a != nil {
			return a.Response, nil
		}
	}
	return nil, nil
}

// fulfil asks the provider for the sampling requests of the input inv
// waits for whose approval an operator gave, journaling each answer,
// before the call is continued. A declined one fails the invocation: the
// server's request cannot be answered, and the tool has not run.
func (r *runner) fulfil(ctx context.Context, u unit, inv *journal.Invocation) (*stepResult, error) {
	w := inv.WaitingInput()
	if w == nil {
		return nil, nil
	}
	reqs, err := w.Parsed()
	if err != nil {
		return nil, err
	}
	for _, q := range reqs {
		a := w.Answer(q.Key + ApprovalSuffix)
		if q.Method != upstream.MethodCreateMessage || w.Answer(q.Key) != nil || a == nil {
			continue
		}
		if !approved(a.Response) {
			e := &journal.Error{Code: CodeSamplingDeclined, Message: fmt.Sprintf("step %s: %s declined to send the server's sampling request; the tool did not run", u.name(), a.By)}
			d := journal.Decision{Verdict: verdict.NotApplicable, Reason: "sampling_declined", View: verdict.Operator}
			if err := r.j.Decide(inv.ID, d, journal.StateFailed, e); err != nil {
				return nil, err
			}
			return &stepResult{status: journal.RunFailed, err: e, invocation: inv.ID, state: journal.StateFailed}, nil
		}
		var p mcp.CreateMessageParams
		if err := json.Unmarshal(q.Params, &p); err != nil {
			return nil, err
		}
		if _, err := r.sample(ctx, u, inv.ID, w.Attempt, q.Key, &p); err != nil {
			out := failed(CodeServerError, "step %s: the sampling provider failed: %v; resuming the run asks it again", u.name(), err)
			out.invocation, out.state = inv.ID, journal.StateIntent
			return &out, nil
		}
	}
	return nil, nil
}

// CodeSamplingDeclined fails a step whose server's sampling request an
// operator declined (sampling: approve: true).
const CodeSamplingDeclined = "MCPFLOW_SAMPLING_DECLINED"
