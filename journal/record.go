package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/internal/verdict"
)

// Run is one execution of a workflow.
type Run struct {
	ID       ID     `json:"id"`
	Workflow string `json:"workflow"`
	// Definition is the workflow source as it was when the run started;
	// resume uses it, not the file on disk.
	Definition []byte `json:"definition,omitempty"`
	// Digest is "sha256:" and the hex digest of Definition.
	Digest string `json:"digest,omitempty"`
	// Source is the path the definition was read from, for people.
	Source string `json:"source,omitempty"`
	// Inputs, secret ones included when the journal is Sealed (encrypted
	// at rest), else redacted by the caller.
	Inputs map[string]any `json:"inputs,omitempty"`
	// Secrets names the inputs declared secret: shown only redacted.
	Secrets    []string   `json:"secrets,omitempty"`
	Workspace  string     `json:"workspace,omitempty"`
	Status     RunStatus  `json:"status"`
	Error      *Error     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Outputs are the workflow's outputs, set when the run succeeds
	// (secrets redacted by the caller unless the journal is Sealed).
	Outputs map[string]any `json:"outputs,omitempty"`
	// Sealed holds Inputs and Outputs encrypted, as stored, when the
	// journal was opened without its key: they are then nil.
	Sealed string `json:"sealed,omitempty"`
	// Approvals are the run's approval gates, one per step with approve:
	// that the run reached, in the order they were requested.
	Approvals []Approval `json:"approvals,omitempty"`
	// TraceParent is the W3C traceparent of the run's span when it was
	// created with tracing on (telemetry): a resumed run continues that
	// trace. Empty when tracing was off. An id, never a payload.
	TraceParent string `json:"trace_parent,omitempty"`
}

// Approval is the approval gate of one step of a run: requested when the
// run reached the step (before any intent of it was written; the run is
// then blocked), and decided by an operator, with who, when and why — or
// decided in advance, before the run reached the step, which the run then
// passes (or fails, rejected) without stopping.
type Approval struct {
	Step string `json:"step"`
	// Message is the step's approve: message for the approver ("" for
	// approve: true, and for a gate decided in advance that the run has
	// not reached yet).
	Message string `json:"message,omitempty"`
	// RequestedAt is when the run reached the step: zero for a gate
	// decided in advance that the run has not reached yet.
	RequestedAt time.Time     `json:"requested_at,omitzero"`
	State       ApprovalState `json:"state"`
	// By, At and Reason are set by the decision.
	By     string     `json:"by,omitempty"`
	At     *time.Time `json:"at,omitempty"`
	Reason string     `json:"reason,omitempty"`
	// InAdvance: the decision was made before the run reached the step.
	InAdvance bool `json:"in_advance,omitempty"`
}

// Reached reports whether the run reached the step of the gate.
func (a *Approval) Reached() bool { return !a.RequestedAt.IsZero() }

// Approval returns the approval gate of step, or nil.
func (r *Run) Approval(step string) *Approval {
	for i := range r.Approvals {
		if r.Approvals[i].Step == step {
			return &r.Approvals[i]
		}
	}
	return nil
}

// PendingApprovals returns the approval gates that wait for a decision.
func (r *Run) PendingApprovals() []Approval {
	var out []Approval
	for _, a := range r.Approvals {
		if a.State == ApprovalPending {
			out = append(out, a)
		}
	}
	return out
}

// Invocation is one logical request — a tools/call, or a resources/read or
// prompts/get (Method says which): one step (or one fan-out item) of a
// run. Retries, replays, first deliveries and operators' retries are
// further attempts of the same invocation (Attempt.Kind says which; Tally
// counts them) and share its idempotency key.
type Invocation struct {
	ID    ID     `json:"id"`
	RunID ID     `json:"run_id"`
	Step  string `json:"step"`
	// Item is the fan-out item index, or -1 for a plain step.
	Item   int    `json:"item"`
	Server string `json:"server"`
	// Tool is what the request addresses: the tool's name (tools/call),
	// the prompt's (prompts/get) or the resource's URI (resources/read).
	Tool string `json:"tool"`
	// Method is the request; empty (MethodCall) for a tools/call, and in
	// every record written before other requests were journaled.
	Method Method `json:"method,omitempty"`
	// Arguments as sent (secrets redacted unless the journal is Sealed),
	// large values capped.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsDigest is the digest of the arguments as actually sent.
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
	// Annotations exactly as the server declared them at send time (raw
	// JSON; absent fields absent); nil when the tool declared none.
	Annotations    json.RawMessage `json:"annotations,omitempty"`
	Trust          Trust           `json:"trust"`
	IdempotencyKey string          `json:"idempotency_key"`
	State          State           `json:"state"`
	Attempts       []Attempt       `json:"attempts"`
	Result         *Result         `json:"result,omitempty"`
	// Inputs are what the call's results asked for before the tool could
	// go on (input_required), one per attempt that asked, with the answers
	// given; sealed with Arguments and Result.
	Inputs []Input `json:"inputs,omitempty"`
	// Sealed holds Arguments, Result and Inputs encrypted, as stored, when the
	// journal was opened without its key: they are then nil.
	Sealed string `json:"sealed,omitempty"`
	// ToolError: the invocation completed with a tool error (a result with
	// isError: true). Kept in clear beside a sealed result, for queries.
	ToolError   bool         `json:"tool_error,omitempty"`
	Error       *Error       `json:"error,omitempty"`
	Decisions   []Decision   `json:"decisions,omitempty"`
	Resolutions []Resolution `json:"resolutions,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
}

// Input is what one attempt's result asked of mcpflow before the tool
// could go on — an input_required result of MCP's multi-round-trip
// requests: the server's requests, the state it asked to have echoed, and
// the answers as they are given. Once every request is answered the call
// is sent again with them (KindContinuation).
type Input struct {
	// Attempt is the attempt whose result asked.
	Attempt int `json:"attempt"`
	// Requests are the server's inputRequests exactly as sent: an object
	// whose keys name the requests, each {"method": …, "params": …}.
	Requests json.RawMessage `json:"requests"`
	// State is the server's requestState, echoed with the answers.
	State string `json:"state,omitempty"`
	// Answers are given one per request; an answer is final.
	Answers []Answer `json:"answers,omitempty"`
}

// Answer is the answer to one input request.
type Answer struct {
	// Key names the request in Input.Requests.
	Key string `json:"key"`
	// Response is the inputResponse sent for it (an elicitation's
	// {"action": …, "content": …}).
	Response json.RawMessage `json:"response"`
	// By is who answered: a person, or "workflow" for a step's elicit:.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// InputRequest is one request of an Input, decoded.
type InputRequest struct {
	Key    string          `json:"-"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Parsed returns the input's requests ordered by key.
func (in *Input) Parsed() ([]InputRequest, error) {
	var m map[string]InputRequest
	if err := json.Unmarshal(in.Requests, &m); err != nil {
		return nil, fmt.Errorf("input requests of attempt %d: %w", in.Attempt, err)
	}
	out := make([]InputRequest, 0, len(m))
	for k, r := range m {
		r.Key = k
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b InputRequest) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Answer returns the answer to the request key, or nil.
func (in *Input) Answer(key string) *Answer {
	for i := range in.Answers {
		if in.Answers[i].Key == key {
			return &in.Answers[i]
		}
	}
	return nil
}

// Unanswered returns the keys of the requests not answered yet, ordered.
func (in *Input) Unanswered() ([]string, error) {
	reqs, err := in.Parsed()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range reqs {
		if in.Answer(r.Key) == nil {
			out = append(out, r.Key)
		}
	}
	return out, nil
}

// Responses is the inputResponses object of the continuation: each
// answer's response under its key. Requests of mcpflow's own (a method
// under "mcpflow/", such as an operator's approval to send a sampling
// request) are not the server's, and their answers are not sent.
func (in *Input) Responses() json.RawMessage {
	reqs, _ := in.Parsed()
	own := map[string]bool{}
	for _, r := range reqs {
		own[r.Key] = strings.HasPrefix(r.Method, "mcpflow/")
	}
	m := make(map[string]json.RawMessage, len(in.Answers))
	for _, a := range in.Answers {
		if !own[a.Key] {
			m[a.Key] = a.Response
		}
	}
	b, _ := json.Marshal(m) // raw messages that were valid when journaled
	return b
}

// WaitingInput returns the input inv waits for: the newest, when the
// newest decision is to continue the call once it is answered and the
// newest attempt asked it. Nil otherwise.
func (inv *Invocation) WaitingInput() *Input {
	d, last := inv.LastDecision(), inv.LastAttempt()
	if inv.State != StateIntent || d == nil || d.Verdict != verdict.Continue || last == nil || last.EndedAt == nil || len(inv.Inputs) == 0 {
		return nil
	}
	in := &inv.Inputs[len(inv.Inputs)-1]
	if in.Attempt != last.N || d.Attempt != last.N {
		return nil
	}
	return in
}

// AskedInCall returns the input the open attempt of inv asked for during
// the call (a server's elicitation/create over a protocol without
// multi-round-trip requests: the call waits open for the answer), when
// one of its requests is unanswered; nil otherwise.
func (inv *Invocation) AskedInCall() *Input {
	last := inv.LastAttempt()
	if inv.State != StateIntent || last == nil || last.EndedAt != nil || len(inv.Inputs) == 0 {
		return nil
	}
	in := &inv.Inputs[len(inv.Inputs)-1]
	if in.Attempt != last.N {
		return nil
	}
	if open, err := in.Unanswered(); err != nil || len(open) == 0 {
		return nil
	}
	return in
}

// Trust is the trust snapshot taken when an attempt was sent.
type Trust struct {
	Server    bool `json:"server"`
	Workspace bool `json:"workspace"`
	// WorkspaceSource says where workspace trust came from: "store" (the
	// user's trust store), "flag" (--trust-workspace) or "" (not trusted).
	WorkspaceSource string `json:"workspace_source,omitempty"`
}

// Attempt is one send of an invocation's tools/call: why it was sent
// (Kind) and what its outcome proved (Failure).
type Attempt struct {
	N      int       `json:"n"`
	SentAt time.Time `json:"sent_at"`
	// Kind says why the attempt was sent: a first send, the step's retry,
	// a replay, a first delivery, an operator's retry. Attempts journaled
	// before kinds were have none: read it with Invocation.Sent.
	Kind AttemptKind `json:"kind,omitempty"`
	// Replay is set on a KindReplay attempt, for the readers of journals
	// written before kinds were, which count the replay budget with it.
	// On an attempt without a Kind it was set on every re-send of a call
	// that may have run, an operator's included.
	Replay bool `json:"replay,omitempty"`
	// EndedAt is set once the attempt's outcome is known.
	EndedAt *time.Time `json:"ended_at,omitempty"`
	// Failure is what the attempt's outcome proved (internal/failure names
	// every class: "connection_lost", "timed_out", "tool_error", …); empty
	// (failure.None) when a result arrived without isError, and while the
	// attempt has no outcome.
	Failure failure.Class `json:"failure,omitempty"`
	// Detail is the upstream error text, kept for the operator only.
	Detail string `json:"detail,omitempty"`
	// Interrupted: the process that sent the attempt stopped while it was
	// in flight, and a resume found it open (Writer.Interrupted). EndedAt
	// is then when the resume found it, not when it ended, which nobody
	// saw: how long it ran is not known.
	Interrupted bool `json:"interrupted,omitempty"`
	// Trust and Annotations are the snapshot this attempt was sent with (the
	// invocation's own fields hold the newest attempt's).
	Trust       *Trust          `json:"trust,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// Decision is a replay policy verdict on a failed attempt, journaled before
// the engine acts on it. A decision once journaled is never re-decided.
type Decision struct {
	// Attempt is the attempt whose failure was decided on.
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	// Verdict is what was decided (internal/verdict names every one);
	// Reason is the machine-readable reason.
	Verdict verdict.Verdict `json:"verdict"`
	Reason  string          `json:"reason"`
	// View says which view of the tool was judged.
	View verdict.View `json:"view"`
}

// Result is a tool's result, capped. For a resources/read or a
// prompts/get (Invocation.Method), StructuredContent is the request's
// whole result as the server sent it — {"contents": […]}, or
// {"description": …, "messages": […]} — and Content is empty.
type Result struct {
	Content           json.RawMessage `json:"content,omitempty"`
	StructuredContent json.RawMessage `json:"structured_content,omitempty"`
	IsError           bool            `json:"is_error"`
}

// Error is a machine-readable code and a message.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Resolution is an operator's decision on an invocation whose outcome the
// engine could not know.
type Resolution struct {
	By   string    `json:"by"`
	At   time.Time `json:"at"`
	As   State     `json:"as"`
	Why  string    `json:"why"`
	From State     `json:"from"`
}

// Digest returns "sha256:" and the hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CapJSON returns v unchanged when it is at most limit bytes; otherwise a
// JSON object {"truncated": true, "bytes": N, "digest": "sha256:…"} that
// keeps the digest of the original.
func CapJSON(v json.RawMessage, limit int) json.RawMessage {
	if len(v) <= limit {
		return v
	}
	out, _ := json.Marshal(struct {
		Truncated bool   `json:"truncated"`
		Bytes     int    `json:"bytes"`
		Digest    string `json:"digest"`
	}{true, len(v), Digest(v)})
	return out
}

// LastAttempt returns the newest attempt, or nil.
func (inv *Invocation) LastAttempt() *Attempt {
	if len(inv.Attempts) == 0 {
		return nil
	}
	return &inv.Attempts[len(inv.Attempts)-1]
}

// LastDecision returns the newest decision, or nil.
func (inv *Invocation) LastDecision() *Decision {
	if len(inv.Decisions) == 0 {
		return nil
	}
	return &inv.Decisions[len(inv.Decisions)-1]
}

// crcTable is CRC-32C (Castagnoli), which CPUs compute in hardware.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// AddChecksum is how a record is stored (schema 2): its JSON followed by the
// CRC-32C of that JSON, big-endian. Every read verifies it, so a flipped
// byte anywhere in a record — a changed result text included — is found.
func AddChecksum(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// StripChecksum verifies a stored record and returns its JSON. what names the
// record in the error, which wraps ErrDamaged.
func StripChecksum(what string, v []byte) ([]byte, error) {
	if len(v) < 4 {
		return nil, fmt.Errorf("%s: %w: record too short", what, ErrDamaged)
	}
	b, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if crc32.Checksum(b, crcTable) != sum {
		return nil, fmt.Errorf("%s: %w: checksum mismatch", what, ErrDamaged)
	}
	return b, nil
}
