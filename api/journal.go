package api

import (
	"encoding/json"

	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/journal"
)

// The engine's journal over the socket of the process that holds it
// (client.Journal, served by httpapi on the unix socket only): one request
// per write of engine.Journal, answered once the owner's store returned
// it, the write durable. The journal's records (journal.Run, Invocation,
// Input, Answer, Decision, Error, Result) are sent as they are: they are
// stored as this JSON, and read back from it. The parameter structs that
// have no JSON tags of their own (Intent, Outcome, NextAttempt) have a
// shape here, so that a raw field left out stays left out (a nil
// json.RawMessage would come back as the bytes "null").

// JournalInfo answers GET /api/journal: what the engine asks of the
// journal besides its writes.
type JournalInfo struct {
	// Sealed: the journal encrypts payloads at rest (see
	// journal.Store.Sealed); Digest is then keyed, and asked of the owner.
	Sealed bool `json:"sealed"`
}

// DigestRequest asks the owner for the digest of Data as its journal
// records it (keyed when sealed: the key never leaves the owner).
type DigestRequest struct {
	Data []byte `json:"data"`
}

// DigestAnswer is the digest of a DigestRequest's data.
type DigestAnswer struct {
	Digest string `json:"digest"`
}

// Intent is a journal.Intent on the wire. What the owner's journal issued
// durably is read back with journal.Relayed (the proof does not cross the
// wire by itself).
type Intent struct {
	ID             journal.ID          `json:"id"`
	RunID          journal.ID          `json:"run_id"`
	IdempotencyKey string              `json:"idempotency_key"`
	Attempt        int                 `json:"attempt"`
	Kind           journal.AttemptKind `json:"kind"`
	Continuation   *Continuation       `json:"continuation,omitempty"`
}

// Continuation is a journal.Continuation on the wire.
type Continuation struct {
	Responses json.RawMessage `json:"responses,omitempty"`
	State     string          `json:"state,omitempty"`
}

// IntentOf is in's shape.
func IntentOf(in journal.Intent) Intent {
	out := Intent{ID: in.ID, RunID: in.RunID, IdempotencyKey: in.IdempotencyKey, Attempt: in.Attempt, Kind: in.Kind}
	if c := in.Continuation; c != nil {
		out.Continuation = &Continuation{Responses: c.Responses, State: c.State}
	}
	return out
}

// Intent is the journal's Intent, not Valid: only journal.Relayed makes
// it so.
func (in Intent) Intent() journal.Intent {
	out := journal.Intent{ID: in.ID, RunID: in.RunID, IdempotencyKey: in.IdempotencyKey, Attempt: in.Attempt, Kind: in.Kind}
	if c := in.Continuation; c != nil {
		out.Continuation = &journal.Continuation{Responses: c.Responses, State: c.State}
	}
	return out
}

// Outcome is a journal.Outcome on the wire.
type Outcome struct {
	State    journal.State     `json:"state"`
	Result   *journal.Result   `json:"result,omitempty"`
	Error    *journal.Error    `json:"error,omitempty"`
	Failure  failure.Class     `json:"failure,omitempty"`
	Detail   string            `json:"detail,omitempty"`
	Decision *journal.Decision `json:"decision,omitempty"`
	Input    *journal.Input    `json:"input,omitempty"`
}

// OutcomeOf is o's shape.
func OutcomeOf(o journal.Outcome) Outcome {
	return Outcome{State: o.State, Result: o.Result, Error: o.Error, Failure: o.Failure, Detail: o.Detail, Decision: o.Decision, Input: o.Input}
}

// Outcome is the journal's Outcome.
func (o Outcome) Outcome() journal.Outcome {
	return journal.Outcome{State: o.State, Result: o.Result, Error: o.Error, Failure: o.Failure, Detail: o.Detail, Decision: o.Decision, Input: o.Input}
}

// NextAttempt is a journal.NextAttempt on the wire.
type NextAttempt struct {
	Kind        journal.AttemptKind `json:"kind"`
	Trust       journal.Trust       `json:"trust"`
	Annotations json.RawMessage     `json:"annotations,omitempty"`
	Decision    *journal.Decision   `json:"decision,omitempty"`
}

// NextAttemptOf is n's shape.
func NextAttemptOf(n journal.NextAttempt) NextAttempt {
	return NextAttempt{Kind: n.Kind, Trust: n.Trust, Annotations: n.Annotations, Decision: n.Decision}
}

// NextAttempt is the journal's NextAttempt.
func (n NextAttempt) NextAttempt() journal.NextAttempt {
	return journal.NextAttempt{Kind: n.Kind, Trust: n.Trust, Annotations: n.Annotations, Decision: n.Decision}
}

// The requests of the journal's writes (POST /api/journal/OP), each named
// for the write, and their answers.
type (
	// CreateRunRequest: POST /api/journal/create-run; answered with the
	// run as the journal set it (RunWritten).
	CreateRunRequest struct {
		Run *journal.Run `json:"run"`
	}
	// RunWritten is a run as a write left it.
	RunWritten struct {
		Run *journal.Run `json:"run"`
	}
	// EndRunRequest: POST /api/journal/end-run (RunWritten), and
	// /set-run-status (no outputs; Done).
	EndRunRequest struct {
		ID      journal.ID        `json:"id"`
		Status  journal.RunStatus `json:"status"`
		Error   *journal.Error    `json:"error,omitempty"`
		Outputs map[string]any    `json:"outputs,omitempty"`
	}
	// RequestApprovalRequest: POST /api/journal/request-approval;
	// answered with the gate as committed.
	RequestApprovalRequest struct {
		Run     journal.ID `json:"run"`
		Step    string     `json:"step"`
		Message string     `json:"message,omitempty"`
	}
	// InvocationRequest: POST /api/journal/begin (Begun) and /skip
	// (InvocationWritten).
	InvocationRequest struct {
		Invocation *journal.Invocation `json:"invocation"`
	}
	// InvocationWritten is an invocation as a write left it.
	InvocationWritten struct {
		Invocation *journal.Invocation `json:"invocation"`
	}
	// Begun answers Begin: the invocation as written and its Intent.
	Begun struct {
		Invocation *journal.Invocation `json:"invocation"`
		Intent     Intent              `json:"intent"`
	}
	// AgainRequest: POST /api/journal/again; answered with the Intent.
	AgainRequest struct {
		ID   journal.ID  `json:"id"`
		Next NextAttempt `json:"next"`
	}
	// FinishRequest: POST /api/journal/finish (Done).
	FinishRequest struct {
		Intent  Intent  `json:"intent"`
		Outcome Outcome `json:"outcome"`
	}
	// InterruptedRequest: POST /api/journal/interrupted (Done).
	InterruptedRequest struct {
		ID      journal.ID `json:"id"`
		Outcome Outcome    `json:"outcome"`
	}
	// DecideRequest: POST /api/journal/decide (Done).
	DecideRequest struct {
		ID       journal.ID       `json:"id"`
		Decision journal.Decision `json:"decision"`
		State    journal.State    `json:"state"`
		Error    *journal.Error   `json:"error,omitempty"`
	}
	// AskRequest: POST /api/journal/ask (Done).
	AskRequest struct {
		ID      journal.ID    `json:"id"`
		Attempt int           `json:"attempt"`
		Input   journal.Input `json:"input"`
	}
	// AnswerInputRequest: POST /api/journal/answer; answered with the
	// input as committed.
	AnswerInputRequest struct {
		ID      journal.ID       `json:"id"`
		Attempt int              `json:"attempt"`
		Answers []journal.Answer `json:"answers"`
	}
	// Done answers a write that returns nothing but its success.
	Done struct {
		OK bool `json:"ok"`
	}
	// RunInvocations answers GET /api/journal/runs/{id}/invocations.
	RunInvocations struct {
		Invocations []journal.Invocation `json:"invocations"`
	}
)
