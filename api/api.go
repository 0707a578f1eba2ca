package api

import (
	"encoding/json"
	"time"

	"github.com/mcpflow/mcpflow/elicit"
	"github.com/mcpflow/mcpflow/journal"
)

// Invocation is one invocation. Arguments and results are left out unless
// asked for.
type Invocation struct {
	ID     string `json:"id"`
	RunID  string `json:"run_id"`
	Step   string `json:"step"`
	Item   *int   `json:"item"` // null, or the for_each index
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Method is the request, resources/read or prompts/get (Tool is then
	// the resource's URI or the prompt's name); absent for a tools/call.
	Method string `json:"method,omitempty"`
	State  string `json:"state"`
	// Attempts are the sends, as the journal and its export have them,
	// each with its kind (AttemptsOf).
	Attempts []journal.Attempt `json:"attempts"`
	// Replays, Retries, OperatorRetries and FirstDeliveries count the
	// attempts by kind (journal.Tally): a replay is a send again after a
	// lost connection that the replay rule cleared, and nothing else.
	Replays         int            `json:"replays"`
	Retries         int            `json:"retries"`
	OperatorRetries int            `json:"operator_retries"`
	FirstDeliveries int            `json:"first_deliveries"`
	IdempotencyKey  string         `json:"idempotency_key"`
	Error           *journal.Error `json:"error"`
	// ToolError: completed with a tool error (state stays completed).
	ToolError bool            `json:"tool_error"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    *journal.Result `json:"result,omitempty"`
}

// InvocationOf is inv's shape, with its arguments and result when payload
// is set.
func InvocationOf(inv *journal.Invocation, payload bool) Invocation {
	t := inv.Tally()
	v := Invocation{
		ID: inv.ID.String(), RunID: inv.RunID.String(), Step: inv.Step,
		Server: inv.Server, Tool: inv.Tool, Method: string(inv.Method), State: inv.State.String(), ToolError: inv.ToolError,
		Attempts: AttemptsOf(inv), Replays: t.Replays, Retries: t.Retries, OperatorRetries: t.OperatorRetries,
		FirstDeliveries: t.FirstDeliveries, IdempotencyKey: inv.IdempotencyKey,
		Error: inv.Error, CreatedAt: inv.CreatedAt, UpdatedAt: inv.UpdatedAt,
	}
	if inv.Item >= 0 {
		item := inv.Item
		v.Item = &item
	}
	if payload {
		v.Arguments, v.Result = inv.Arguments, inv.Result
	}
	return v
}

// InvocationDetail is one invocation with everything the journal knows of
// it: the annotations and trust it was sent under, the replay decisions
// and the operators' resolutions.
type InvocationDetail struct {
	Invocation
	Annotations     json.RawMessage      `json:"annotations"`
	Trust           journal.Trust        `json:"trust"`
	ArgumentsDigest string               `json:"arguments_digest"`
	Decisions       []journal.Decision   `json:"decisions"`
	Resolutions     []journal.Resolution `json:"resolutions"`
	// Inputs are what servers asked during the calls (elicitations) and
	// the answers, secret fields redacted (RedactedInputs).
	Inputs []journal.Input `json:"inputs,omitempty"`
}

// RedactedInputs is inv's inputs as shown: each answer's secret fields
// (as its question's schema marks them) redacted.
func RedactedInputs(inv *journal.Invocation) []journal.Input {
	if len(inv.Inputs) == 0 {
		return nil
	}
	out := make([]journal.Input, len(inv.Inputs))
	for i, in := range inv.Inputs {
		in.Answers = append([]journal.Answer(nil), in.Answers...)
		reqs, _ := in.Parsed()
		for j, a := range in.Answers {
			for _, r := range reqs {
				if q, err := elicit.Parse(r.Params); r.Key == a.Key && r.Method == elicit.Method && err == nil {
					in.Answers[j].Response = q.Redact(a.Response)
				}
			}
		}
		out[i] = in
	}
	return out
}

// InvocationDetailOf is inv's detailed shape.
func InvocationDetailOf(inv *journal.Invocation, payload bool) InvocationDetail {
	d := InvocationDetail{
		Invocation: InvocationOf(inv, payload), Annotations: inv.Annotations, Trust: inv.Trust,
		ArgumentsDigest: inv.ArgumentsDigest, Decisions: inv.Decisions, Resolutions: inv.Resolutions,
		Inputs: RedactedInputs(inv),
	}
	if d.Annotations == nil {
		d.Annotations = json.RawMessage("null")
	}
	if d.Decisions == nil {
		d.Decisions = []journal.Decision{}
	}
	if d.Resolutions == nil {
		d.Resolutions = []journal.Resolution{}
	}
	return d
}

// AttemptsOf is an invocation's attempts as every view shows them: each
// with its kind, the one journaled or, for an attempt journaled before
// kinds were, the one the journal's decisions say (journal.Invocation.Sent),
// and its replay flag set on a replay only. A copy: the record is not
// changed. An empty list when it has none (a skipped step), never null.
func AttemptsOf(inv *journal.Invocation) []journal.Attempt {
	out := make([]journal.Attempt, len(inv.Attempts))
	for i, a := range inv.Attempts {
		a.Kind = inv.Sent(i)
		a.Replay = a.Kind == journal.KindReplay
		out[i] = a
	}
	return out
}

// Run is one run, with a line per invocation.
type Run struct {
	ID         string         `json:"id"`
	Workflow   string         `json:"workflow"`
	Status     string         `json:"status"`
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt *time.Time     `json:"finished_at"`
	Error      *journal.Error `json:"error"`
	Workspace  string         `json:"workspace"`
	Digest     string         `json:"digest"`
	Inputs     map[string]any `json:"inputs"`
	Outputs    map[string]any `json:"outputs"`
	Steps      []Step         `json:"steps"`
	// Approvals are the run's approval gates: pending, approved or
	// rejected, with who, when and why.
	Approvals []Approval `json:"approvals"`
}

// Step is one invocation of a run, as the run lists it.
type Step struct {
	Step       string            `json:"step"`
	Item       *int              `json:"item,omitempty"` // the for_each index
	Invocation string            `json:"invocation"`
	Server     string            `json:"server"`
	Tool       string            `json:"tool"`
	Method     string            `json:"method,omitempty"` // as in Invocation
	State      string            `json:"state"`
	Attempts   []journal.Attempt `json:"attempts"`
	Error      *journal.Error    `json:"error"`
	// ToolError: completed with a tool error (state stays completed, and
	// the step failed unless it continues on error), as in Invocation.
	ToolError bool `json:"tool_error"`
}

// RunOf is r's shape with its invocations.
func RunOf(r *journal.Run, invs []journal.Invocation) Run {
	v := Run{
		ID: r.ID.String(), Workflow: r.Workflow, Status: r.Status.String(),
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Error: r.Error,
		Workspace: r.Workspace, Digest: r.Digest, Inputs: r.Inputs, Outputs: r.Outputs, Steps: []Step{},
		Approvals: []Approval{},
	}
	for _, a := range r.Approvals {
		v.Approvals = append(v.Approvals, ApprovalOf(a))
	}
	for _, inv := range invs {
		st := Step{
			Step: inv.Step, Invocation: inv.ID.String(), Server: inv.Server, Tool: inv.Tool, Method: string(inv.Method),
			State: inv.State.String(), Attempts: AttemptsOf(&inv), Error: inv.Error, ToolError: inv.ToolError,
		}
		if inv.Item >= 0 {
			item := inv.Item
			st.Item = &item
		}
		v.Steps = append(v.Steps, st)
	}
	return v
}

// Approval is a step's approval gate.
type Approval struct {
	Step    string `json:"step"`
	Message string `json:"message"`
	State   string `json:"state"`
	// RequestedAt is when the run reached the step: null for a gate
	// decided in advance that the run has not reached yet.
	RequestedAt *time.Time `json:"requested_at"`
	By          string     `json:"by"`
	At          *time.Time `json:"at"`
	Reason      string     `json:"reason"`
	// InAdvance: decided before the run reached the step.
	InAdvance bool `json:"in_advance"`
}

// ApprovalOf is a's shape.
func ApprovalOf(a journal.Approval) Approval {
	v := Approval{Step: a.Step, Message: a.Message, State: a.State.String(), By: a.By, At: a.At, Reason: a.Reason, InAdvance: a.InAdvance}
	if a.Reached() {
		at := a.RequestedAt
		v.RequestedAt = &at
	}
	return v
}
