package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// Journal is engine.Journal through the process that holds the journal,
// on its unix socket: for a process that must run the engine on server
// sessions of its own (mcpflow proxy: the upstream may be a stateful stdio
// process, so its calls cannot be handed to the owner) while another
// process holds the journal (mcpflow server, or the first proxy).
//
// Every write returns only after the owner's store returned it: durable
// there, as the store's own write is. Begin and Again return an Intent
// that is Valid only when the owner answered with it (journal.Relayed): a
// tools/call is still sent only after its intent is on the owner's disk.
// The Later writes (CreateRunLater, FinishLater, SkipLater) are immediate:
// each is committed before it returns and its Pending is done
// (journal.Committed), which keeps the engine's rule — an outcome is
// durable before anything that depends on it — at the price of one commit
// each instead of a shared one. Errors are the owner's, read back from
// their codes: errors.Is finds journal.ErrTransition, ErrNotFound and
// ErrClosed as in the owner's process.
//
// When the owner goes away (it ended, or was killed), every request fails
// (service.ErrUnreachable, or the error of the request cut off): the
// engine stops the run with a journal error, and the journal keeps what
// the owner last committed — an intent without an outcome is found on
// resume and settled under the replay rule, like any crash mid-call.
// There is no failover: the caller may find the journal's new owner and
// resume.
//
// A Journal is safe for concurrent use. Requests have no deadline of
// their own: a hung owner hangs its writes.
type Journal struct {
	c      *Client
	sealed bool

	mu     sync.Mutex
	closed bool
	// broken is why a keyed Digest got no answer: every write fails with
	// it from then on (the digest it returned, "", must not be journaled).
	broken error
}

var _ engine.Journal = (*Journal)(nil)

// Journal returns the engine's journal through the process that holds it
// on c's socket. It asks the owner once whether its journal is sealed; an
// owner that does not serve its journal to other processes (an older
// mcpflow) is an error.
func (c *Client) Journal(ctx context.Context) (*Journal, error) {
	var info api.JournalInfo
	if err := c.do(ctx, http.MethodGet, "/api/journal", nil, &info); err != nil {
		return nil, fmt.Errorf("the journal through %s: %w", c.socket, err)
	}
	return &Journal{c: c, sealed: info.Sealed}, nil
}

// Close ends the journal's use here: every call after it returns
// journal.ErrClosed. The owner's journal stays open, and c too.
func (j *Journal) Close() error {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	return nil
}

// usable is nil when the journal may be asked: not closed, and not
// broken by a Digest that got no answer.
func (j *Journal) usable() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.closed:
		return journal.ErrClosed
	case j.broken != nil:
		return j.broken
	}
	return nil
}

// call sends one request of the journal (POST /api/journal/op, or GET
// path) and decodes the answer into out.
func (j *Journal) call(method, path string, body, out any) error {
	if err := j.usable(); err != nil {
		return err
	}
	// No context of the run: a cancelled run journals how it ended.
	if err := j.c.do(context.Background(), method, path, body, out); err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	return nil
}

func (j *Journal) write(op string, body, out any) error {
	if out == nil {
		out = &api.Done{}
	}
	return j.call(http.MethodPost, "/api/journal/"+op, body, out)
}

// Publish hands ev, an event of a run going here, to the owner, which
// streams it to whoever follows runs there (its UI, runs watch) as it
// streams its own runs'. An event is news, not a record: one the owner
// does not take within publishWait is dropped.
func (j *Journal) Publish(ev engine.Event) {
	if j.usable() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishWait)
	defer cancel()
	_ = j.c.do(ctx, http.MethodPost, "/api/journal/event", service.EventOf(ev), &api.Done{})
}

// publishWait bounds how long a run waits for the owner to take one of its
// events.
const publishWait = time.Second

// CreateRun writes a new run through the owner and sets what the journal
// set on r (its id when unset, status, times, digest). Durable when it
// returns nil.
func (j *Journal) CreateRun(r *journal.Run) error {
	send := *r
	send.Status = journal.RunRunning // what the journal sets: a valid status crosses the wire
	var got api.RunWritten
	if err := j.write("create-run", api.CreateRunRequest{Run: &send}, &got); err != nil {
		return err
	}
	if got.Run == nil {
		return errors.New("journal create-run: no run in the answer")
	}
	r.ID, r.Status, r.Digest = got.Run.ID, got.Run.Status, got.Run.Digest
	r.StartedAt, r.UpdatedAt, r.FinishedAt = got.Run.StartedAt, got.Run.UpdatedAt, got.Run.FinishedAt
	return nil
}

// CreateRunLater is CreateRun, committed before it returns (see Journal).
func (j *Journal) CreateRunLater(r *journal.Run) (*journal.Pending, error) {
	return committed(j.CreateRun(r))
}

// SetRunStatus is the owner's journal.Store.SetRunStatus. Durable when it
// returns nil.
func (j *Journal) SetRunStatus(id journal.ID, st journal.RunStatus, e *journal.Error) error {
	return j.write("set-run-status", api.EndRunRequest{ID: id, Status: st, Error: e}, nil)
}

// EndRun is the owner's journal.Store.EndRun: the run as committed.
func (j *Journal) EndRun(id journal.ID, st journal.RunStatus, e *journal.Error, outputs map[string]any) (*journal.Run, error) {
	var got api.RunWritten
	if err := j.write("end-run", api.EndRunRequest{ID: id, Status: st, Error: e, Outputs: outputs}, &got); err != nil {
		return nil, err
	}
	if got.Run == nil {
		return nil, errors.New("journal end-run: no run in the answer")
	}
	return got.Run, nil
}

// RequestApproval is the owner's journal.Store.RequestApproval: the gate
// as committed.
func (j *Journal) RequestApproval(run journal.ID, step, message string) (*journal.Approval, error) {
	var a journal.Approval
	if err := j.write("request-approval", api.RequestApprovalRequest{Run: run, Step: step, Message: message}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Begin writes the intent of a new invocation through the owner, sets
// what the journal set on inv (id, idempotency key, state, attempts,
// times), and returns its Intent once the owner answered: the intent
// record is durable there.
func (j *Journal) Begin(inv *journal.Invocation) (journal.Intent, error) {
	var got api.Begun
	if err := j.newInvocation("begin", inv, journal.StateIntent, &got); err != nil {
		return journal.Intent{}, err
	}
	if got.Invocation == nil || got.Intent.ID != got.Invocation.ID {
		return journal.Intent{}, errors.New("journal begin: the answer holds no intent of the invocation")
	}
	wrote(inv, got.Invocation)
	return journal.Relayed(got.Intent.Intent()), nil
}

// Skip records a skipped step through the owner, and sets what the
// journal set on inv. Durable when it returns nil.
func (j *Journal) Skip(inv *journal.Invocation) error {
	var got api.InvocationWritten
	if err := j.newInvocation("skip", inv, journal.StateSkipped, &got); err != nil {
		return err
	}
	if got.Invocation == nil {
		return errors.New("journal skip: no invocation in the answer")
	}
	wrote(inv, got.Invocation)
	return nil
}

// SkipLater is Skip, committed before it returns (see Journal).
func (j *Journal) SkipLater(inv *journal.Invocation) (*journal.Pending, error) {
	return committed(j.Skip(inv))
}

// newInvocation sends inv, in state (the one the journal sets: a valid
// state crosses the wire), to op.
func (j *Journal) newInvocation(op string, inv *journal.Invocation, state journal.State, out any) error {
	send := *inv
	send.State = state
	return j.write(op, api.InvocationRequest{Invocation: &send}, out)
}

// wrote sets on inv the fields the journal owns, as the owner's write set
// them on its copy.
func wrote(inv, got *journal.Invocation) {
	inv.ID, inv.IdempotencyKey, inv.State, inv.Attempts = got.ID, got.IdempotencyKey, got.State, got.Attempts
	inv.CreatedAt, inv.UpdatedAt = got.CreatedAt, got.UpdatedAt
	inv.Result, inv.Error, inv.Decisions, inv.Resolutions = got.Result, got.Error, got.Decisions, got.Resolutions
}

// Again writes a new attempt through the owner and returns its Intent
// once the owner answered: the attempt's record is durable there.
func (j *Journal) Again(id journal.ID, next journal.NextAttempt) (journal.Intent, error) {
	var got api.Intent
	if err := j.write("again", api.AgainRequest{ID: id, Next: api.NextAttemptOf(next)}, &got); err != nil {
		return journal.Intent{}, err
	}
	if got.ID != id {
		return journal.Intent{}, fmt.Errorf("journal again: the answer holds an intent of %s, not %s", got.ID.Short(), id.Short())
	}
	return journal.Relayed(got.Intent()), nil
}

// Finish records the outcome of the attempt in started, through the
// owner. An Intent this journal (or any) did not issue is refused here,
// as the journal refuses it. Durable when it returns nil.
func (j *Journal) Finish(in journal.Intent, o journal.Outcome) error {
	if !in.Valid() {
		return fmt.Errorf("finish: intent not issued by the journal: %w", journal.ErrTransition)
	}
	return j.write("finish", api.FinishRequest{Intent: api.IntentOf(in), Outcome: api.OutcomeOf(o)}, nil)
}

// FinishLater is Finish, committed before it returns (see Journal).
func (j *Journal) FinishLater(in journal.Intent, o journal.Outcome) (*journal.Pending, error) {
	return committed(j.Finish(in, o))
}

// Interrupted is the owner's journal.Store.Interrupted. Durable when it
// returns nil.
func (j *Journal) Interrupted(id journal.ID, o journal.Outcome) error {
	return j.write("interrupted", api.InterruptedRequest{ID: id, Outcome: api.OutcomeOf(o)}, nil)
}

// Decide is the owner's journal.Store.Decide. Durable when it returns nil.
func (j *Journal) Decide(id journal.ID, d journal.Decision, st journal.State, e *journal.Error) error {
	return j.write("decide", api.DecideRequest{ID: id, Decision: d, State: st, Error: e}, nil)
}

// Ask is the owner's journal.Store.Ask. Durable when it returns nil.
func (j *Journal) Ask(id journal.ID, attempt int, in journal.Input) error {
	return j.write("ask", api.AskRequest{ID: id, Attempt: attempt, Input: in}, nil)
}

// Answer is the owner's journal.Store.Answer: the input as committed.
func (j *Journal) Answer(id journal.ID, attempt int, answers []journal.Answer) (*journal.Input, error) {
	var in journal.Input
	if err := j.write("answer", api.AnswerInputRequest{ID: id, Attempt: attempt, Answers: answers}, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Run reads a run from the owner's journal, as its store reads it.
func (j *Journal) Run(id journal.ID) (*journal.Run, error) {
	var r journal.Run
	if err := j.call(http.MethodGet, "/api/journal/runs/"+id.String(), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Invocation reads an invocation from the owner's journal.
func (j *Journal) Invocation(id journal.ID) (*journal.Invocation, error) {
	var inv journal.Invocation
	if err := j.call(http.MethodGet, "/api/journal/invocations/"+id.String(), nil, &inv); err != nil {
		return nil, err
	}
	return &inv, nil
}

// RunInvocations reads a run's invocations from the owner's journal, in
// creation order.
func (j *Journal) RunInvocations(id journal.ID) ([]journal.Invocation, error) {
	var got api.RunInvocations
	if err := j.call(http.MethodGet, "/api/journal/runs/"+id.String()+"/invocations", nil, &got); err != nil {
		return nil, err
	}
	return got.Invocations, nil
}

// Sealed is the owner's journal's, as it answered when the Journal was
// made.
func (j *Journal) Sealed() bool { return j.sealed }

// Digest is the digest of b as the owner's journal records it. Without a
// key it is journal.Digest, computed here; with one it is keyed, and
// asked of the owner (the key never leaves it). A keyed digest that gets
// no answer returns "" and breaks the Journal: every write after it
// fails with why, so that "" is never journaled as a digest.
func (j *Journal) Digest(b []byte) string {
	if !j.sealed {
		return journal.Digest(b)
	}
	var got api.DigestAnswer
	err := j.write("digest", api.DigestRequest{Data: b}, &got)
	if err == nil && got.Digest == "" {
		err = errors.New("journal digest: no digest in the answer")
	}
	if err != nil {
		j.mu.Lock()
		if j.broken == nil {
			j.broken = err
		}
		j.mu.Unlock()
		return ""
	}
	return got.Digest
}

// committed is the Pending of a Later write that was committed at once,
// or its error.
func committed(err error) (*journal.Pending, error) {
	if err != nil {
		return nil, err
	}
	return journal.Committed(), nil
}
