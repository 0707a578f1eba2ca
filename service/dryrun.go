package service

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// PlannedCall is one call a run would make, as a dry run sees it: a
// tools/call, or a resources/read or prompts/get (Method).
type PlannedCall struct {
	Step   string
	Item   int // the for_each item, or -1
	Server string
	// Tool is what the request addresses: the tool's name, the prompt's,
	// or the resource's URI (as evaluated when it can be, else as
	// written).
	Tool   string
	Method journal.Method
	// Arguments are what would be sent (secret input values redacted), or
	// nil when they cannot be known before the run (Pending says why).
	Arguments json.RawMessage
	// Pending names what the arguments, the condition or the for_each list
	// depend on that only the run produces (earlier steps' results).
	Pending string
	// Skipped: the step's condition is known to be false.
	Skipped bool
	// Approve: the run would stop before this call until an operator
	// approves the step (mcpflow approve); ApproveMessage is what the
	// approver is shown.
	Approve        bool
	ApproveMessage string
	// Verdict is the replay verdict a lost call would get now; Declared
	// the verdict on the tool's annotations alone.
	Verdict  replay.Decision
	Declared replay.Reason
	// Problem is why the call could not be sent as it stands (unknown
	// tool, arguments that do not fit the schema, server unavailable).
	Problem string
}

// DryRun loads and validates a workflow, connects to its servers and
// discovers its tools, and evaluates every step whose inputs are known
// before the run: it returns the calls the run would make, with their
// arguments and the replay verdict each would get. It writes nothing to
// the journal and calls no tool.
func (s *Service) DryRun(ctx context.Context, req RunRequest) ([]PlannedCall, error) {
	wf, inputs, err := s.load(req)
	if err != nil {
		return nil, err
	}
	x := s.prepare(wf.Servers, wf.Own, s.o.Workspace, req.TrustWorkspace)
	defer x.close()
	secrets := workflow.SecretValues(wf.SecretInputs(), inputs)
	env := map[string]string{}
	for _, name := range wf.Env {
		env[name] = os.Getenv(name)
	}
	vars := workflow.Vars{Inputs: inputs, Steps: map[string]any{}, Env: env}
	var out []PlannedCall
	for _, st := range wf.Steps {
		base := PlannedCall{Step: st.ID, Item: -1, Server: st.Server, Tool: st.Target(), Method: st.Method(), Approve: st.Approve, ApproveMessage: st.ApproveMessage}
		if refs := st.If.StepRefs(); len(refs) > 0 {
			base.Pending = "its condition reads " + stepList(refs)
		} else if st.If != nil {
			v, err := st.If.Eval(ctx, vars)
			if b, ok := v.(bool); err == nil && ok && !b {
				base.Skipped = true
				out = append(out, base)
				continue
			}
		}
		items := []any{nil}
		loop := st.ForEach != nil
		if loop {
			if refs := st.ForEach.StepRefs(); len(refs) > 0 {
				base.Pending = joinPending(base.Pending, "its for_each list reads "+stepList(refs))
				items = nil
			} else if v, err := st.ForEach.Eval(ctx, vars); err != nil {
				base.Problem = err.Error()
				items = nil
			} else if list, ok := v.([]any); ok {
				items = list
			}
			if items == nil {
				out = append(out, s.judge(ctx, x, base, nil))
				continue
			}
		}
		for i, item := range items {
			call := base
			iv := vars
			if loop {
				call.Item, iv.Item, iv.Index, iv.InLoop = i, item, i, true
			}
			var args json.RawMessage
			if refs := st.With.StepRefs(); len(refs) > 0 {
				call.Pending = joinPending(call.Pending, "its arguments read "+stepList(refs))
			} else if st.Method().Reads() {
				args, call = readArgs(ctx, st, iv, call, secrets)
			} else {
				var v any = map[string]any{}
				if st.With != nil {
					if v, err = st.With.Eval(ctx, iv); err != nil {
						call.Problem = err.Error()
					}
				}
				if call.Problem == "" {
					args, _ = json.Marshal(v)
				}
			}
			call = s.judge(ctx, x, call, args)
			if args != nil {
				call.Arguments = workflow.RedactJSON(args, secrets)
			}
			out = append(out, call)
		}
	}
	return out, nil
}

// readArgs are a read step's arguments as the run would send them (see
// engine's readArgs), and the call with its URI evaluated, or with what is
// wrong.
func readArgs(ctx context.Context, st *workflow.Step, vars workflow.Vars, call PlannedCall, secrets []string) (json.RawMessage, PlannedCall) {
	if st.Method() == journal.MethodRead {
		if refs := st.Resource.StepRefs(); len(refs) > 0 {
			call.Pending = joinPending(call.Pending, "its URI reads "+stepList(refs))
			return nil, call
		}
		v, err := st.Resource.Eval(ctx, vars)
		uri, ok := v.(string)
		if err != nil || !ok {
			call.Problem = joinPending(call.Problem, fmt.Sprintf("resource: the URI evaluates to %s, not a string (%v)", workflow.Text(v), err))
			return nil, call
		}
		call.Tool, _ = workflow.RedactValue(uri, secrets).(string)
		args, _ := json.Marshal(map[string]string{"uri": uri})
		return args, call
	}
	var v any = map[string]any{}
	if st.With != nil {
		var err error
		if v, err = st.With.Eval(ctx, vars); err != nil {
			call.Problem = err.Error()
			return nil, call
		}
	}
	pa, err := workflow.PromptArguments(v)
	if err != nil {
		call.Problem = err.Error()
		return nil, call
	}
	args, _ := json.Marshal(pa)
	return args, call
}

// judge discovers the call's tool, checks its arguments when they are
// known, and gives the replay verdict a lost call would get now. A read
// has no tool: its resource (when its URI is known) or its prompt and the
// prompt's arguments are checked against what the server lists, and its
// verdict is a read's.
func (s *Service) judge(ctx context.Context, x *execution, call PlannedCall, args json.RawMessage) PlannedCall {
	sess, err := x.pool.Session(ctx, call.Server)
	if err != nil {
		call.Problem = joinPending(call.Problem, fmt.Sprintf("server %q unavailable: %v", call.Server, firstLineOf(err.Error())))
		return call
	}
	if call.Method.Reads() {
		if err := checkRead(ctx, sess, call.Method, call.Tool, args); err != nil {
			call.Problem = joinPending(call.Problem, err.Error())
		}
		call.Verdict, call.Declared = replay.Judge(replay.View{Read: true}, 0), replay.ReasonReadRequest
		return call
	}
	tool, err := sess.Tool(ctx, call.Tool)
	if err != nil {
		call.Problem = joinPending(call.Problem, err.Error())
		return call
	}
	if args != nil {
		if err := tool.Validate(args); err != nil {
			call.Problem = joinPending(call.Problem, err.Error())
		}
	}
	call.Verdict, call.Declared = verdictNow(x.trust.Trust(call.Server), tool)
	return call
}

// checkRead checks a read against what the server lists: a resource's URI
// (when args, its params, are known) is one it lists or one of a
// template's; a prompt exists and, when args are known, is given every
// argument it requires and none it does not take.
func checkRead(ctx context.Context, sess *upstream.Session, m journal.Method, target string, args json.RawMessage) error {
	if m == journal.MethodRead {
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(args, &p) != nil || p.URI == "" {
			return nil
		}
		return sess.CheckResource(ctx, p.URI)
	}
	p, err := sess.Prompt(ctx, target)
	if err != nil || args == nil {
		return err
	}
	var given map[string]string
	json.Unmarshal(args, &given)
	return p.CheckArguments(slices.Collect(maps.Keys(given)))
}

func stepList(refs []string) string {
	return "steps." + strings.Join(refs, ", steps.")
}

func joinPending(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
