package engine

import (
	"errors"

	"github.com/mcpflow/mcpflow/journal"
)

// One commit per step. A step's outcome (and a skipped step, and the run's
// creation) is not committed on its own: it is queued (journal.Pending) and
// rides with the run's next write — the next step's intent, or the run's
// end — in one commit. The rule that makes this safe: an outcome is
// durable before anything that depends on it.
//
//   - The next call: its intent is an immediate write, committed with or
//     after everything queued before it; the call is sent only once that
//     write returned and every queued write of the run is confirmed.
//   - A reported success: the StepFinished event of a queued outcome is
//     held until the outcome is confirmed durable.
//   - A read of the journal, the run's outputs and end: reads flush first,
//     and the end is an immediate write.
//   - Time: before the run waits for I/O that is not a commit of its own —
//     starting a server it has not used yet — the queue is flushed, so an
//     outcome never waits for a server to start.
//
// A crash before the commit loses the queued writes, and nothing depended
// on them: on resume the call is found in flight, like any crash mid-call.

// queue queues p, a write of this run that rides with the next commit.
// outcome says it records what became of a step (a result, a skip): such a
// write must not wait for a server to start. The run's creation may: until
// the first intent, nothing depends on it.
func (r *runner) queue(p *journal.Pending, outcome bool) {
	r.dmu.Lock()
	r.pending = append(r.pending, p)
	if outcome {
		r.outcomes++
	}
	r.dmu.Unlock()
}

// flush returns once every queued write of the run is committed (committing
// them now if no other write has), and emits the events that waited for
// them. An error is a queued write that failed: the run must not go on.
func (r *runner) flush() error {
	r.dmu.Lock()
	pending, held := r.pending, r.held
	r.pending, r.held, r.outcomes = nil, nil, 0
	r.dmu.Unlock()
	var errs []error
	for _, p := range pending {
		if err := p.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, ev := range held {
		r.emit(ev)
	}
	return nil
}

// settled follows an immediate write: once it returned nil, every write
// queued before it is committed too (or failed); flush confirms it.
func (r *runner) settled(err error) error {
	if err != nil {
		return err
	}
	return r.flush()
}

// emitDurable emits ev once the run's queued writes are durable: at once
// when nothing is queued.
func (r *runner) emitDurable(ev Event) {
	r.dmu.Lock()
	if len(r.pending) > 0 {
		r.held = append(r.held, ev)
		r.dmu.Unlock()
		return
	}
	r.dmu.Unlock()
	r.emit(ev)
}

// beforeStarting flushes the queue before the run connects to a server it
// has not used yet, when it holds an outcome: starting a server is I/O a
// queued outcome must not wait for.
func (r *runner) beforeStarting(server string) error {
	r.dmu.Lock()
	wait := !r.used[server] && r.outcomes > 0
	r.dmu.Unlock()
	if !wait {
		return nil
	}
	return r.flush()
}

// using notes a server the run is connected to.
func (r *runner) using(server string) {
	r.dmu.Lock()
	r.used[server] = true
	r.dmu.Unlock()
}

// The run's journal (scrubbing) commits every write but the queued ones at
// once, and confirms the queue after each; reads see the queue committed.

func (s scrubbing) Begin(inv *journal.Invocation) (journal.Intent, error) {
	in, err := s.Journal.Begin(inv)
	return in, s.r.settled(err)
}

func (s scrubbing) Again(id journal.ID, next journal.NextAttempt) (journal.Intent, error) {
	in, err := s.Journal.Again(id, next)
	return in, s.r.settled(err)
}

func (s scrubbing) RequestApproval(run journal.ID, step, message string) (*journal.Approval, error) {
	a, err := s.Journal.RequestApproval(run, step, message)
	return a, s.r.settled(err)
}

func (s scrubbing) SetRunStatus(id journal.ID, st journal.RunStatus, e *journal.Error) error {
	return s.r.settled(s.Journal.SetRunStatus(id, st, s.r.scrubError(e)))
}

// FinishLater queues a completed step's outcome (see queue).
func (s scrubbing) FinishLater(in journal.Intent, o journal.Outcome) error {
	o.Error, o.Detail = s.r.scrubError(o.Error), s.r.scrub(o.Detail)
	p, err := s.Journal.FinishLater(in, o)
	if err != nil {
		return err
	}
	s.r.queue(p, true)
	if s.r.live {
		s.r.dmu.Lock()
		s.r.queued[in.ID] = p
		s.r.dmu.Unlock()
	}
	return nil
}

// outcomeDurable returns once the queued outcome of invocation id, if
// any, is committed (a Live run's call answers its client only then,
// whichever flush committed it), or failed.
func (r *runner) outcomeDurable(id journal.ID) error {
	r.dmu.Lock()
	p := r.queued[id]
	delete(r.queued, id)
	r.dmu.Unlock()
	if p == nil {
		return nil
	}
	return p.Wait()
}

// SkipLater queues a skipped step.
func (s scrubbing) SkipLater(inv *journal.Invocation) error {
	p, err := s.Journal.SkipLater(inv)
	if err != nil {
		return err
	}
	s.r.queue(p, true)
	return nil
}

func (s scrubbing) Run(id journal.ID) (*journal.Run, error) {
	if err := s.r.flush(); err != nil {
		return nil, err
	}
	return s.Journal.Run(id)
}

func (s scrubbing) Invocation(id journal.ID) (*journal.Invocation, error) {
	if err := s.r.flush(); err != nil {
		return nil, err
	}
	return s.Journal.Invocation(id)
}

func (s scrubbing) RunInvocations(id journal.ID) ([]journal.Invocation, error) {
	if err := s.r.flush(); err != nil {
		return nil, err
	}
	return s.Journal.RunInvocations(id)
}
