package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
)

// activeRun is a run going in this process: reserved by a resume before
// it starts, or started by a run or a call (track). Its owner lets it go
// once, after releasing its lease on a shared journal: a resume waiting
// for it (reserveForResume) then finds the run free here and elsewhere.
type activeRun struct {
	cancel context.CancelCauseFunc
	// started: the run went running here (its RunStarted event). A run
	// that started and is no longer running in the journal has written
	// its end and is being let go (or, on a shared journal, lost its lease
	// to a worker that ended it, and is stopping).
	started bool // guarded by Service.mu
	// held: its owner holds the run's lease (a shared journal's), which
	// letGo releases first.
	held bool
	gone chan struct{}
	once sync.Once
}

// endingWait bounds how long a resume waits for a run whose end is
// journaled to be let go (what remains is the run's end reported to its
// Events, which read its invocations, and on a shared journal its lease
// freed) before it refuses, as it refuses a run still going.
const endingWait = 10 * time.Second

// reserve marks run id as going in this service, with cancel to cancel
// it. When the run is going already, it returns nil and the run's entry.
func (s *Service) reserve(id journal.ID, cancel context.CancelCauseFunc) (mine, going *activeRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.active[id]; ok {
		return nil, a
	}
	a := &activeRun{cancel: cancel, gone: make(chan struct{})}
	s.active[id] = a
	return a, nil
}

// reserveForResume reserves run id for a resume. A run going here is
// refused (RunningError), unless it has ended and is being let go: then
// the resume waits for it, up to endingWait, and reserves it after.
func (s *Service) reserveForResume(ctx context.Context, id journal.ID, cancel context.CancelCauseFunc) (*activeRun, error) {
	mine, going := s.reserve(id, cancel)
	if mine != nil {
		return mine, nil
	}
	if !s.ending(id, going) {
		return nil, &RunningError{Run: id}
	}
	t := time.NewTimer(endingWait)
	defer t.Stop()
	select {
	case <-going.gone:
	case <-t.C:
		return nil, &RunningError{Run: id}
	case <-ctx.Done():
		return nil, waitStopped(id, ctx)
	}
	if mine, _ = s.reserve(id, cancel); mine == nil {
		return nil, &RunningError{Run: id} // another resume was first
	}
	return mine, nil
}

// acquireForResume takes run id's lease for a resume (acquire). A run
// that another live worker holds is refused (RunningError), unless the
// journal has it ended: that worker lets it go next (or, resuming it
// itself, sets it running, and the resume is refused then), and the resume
// waits for it, up to endingWait, as it waits for a run ending here.
func (s *Service) acquireForResume(ctx context.Context, id journal.ID) error {
	deadline := time.Now().Add(endingWait)
	for {
		err := s.acquire(id)
		if !errors.Is(err, ErrRunning) {
			return err
		}
		run, rerr := s.j.Run(id)
		if rerr != nil || run.Status == journal.RunRunning || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(heldPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return waitStopped(id, ctx)
		}
	}
}

// waitStopped is the error of a resume whose context ended (Cancel of the
// run here, the server stopping) while it waited for the run to be let go:
// it did not resume the run.
func waitStopped(id journal.ID, ctx context.Context) error {
	err := fmt.Errorf("run %s: the resume was stopped while it waited for the run to be let go: %w", id.Short(), context.Canceled)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}

// heldPoll is how often a resume asks again for the lease of a run another
// worker is letting go.
const heldPoll = 50 * time.Millisecond

// ending reports whether a, run id going here, has written its end: it
// started, and the journal no longer has it running.
func (s *Service) ending(id journal.ID, a *activeRun) bool {
	s.mu.Lock()
	started := a.started
	s.mu.Unlock()
	if !started {
		return false
	}
	run, err := s.j.Run(id)
	return err == nil && run.Status != journal.RunRunning
}

// letGo ends a's time as run id's entry, once: the run's lease first,
// when a holds it; then waiters go on.
func (s *Service) letGo(id journal.ID, a *activeRun) {
	a.once.Do(func() {
		if a.held {
			s.release(id)
		}
		s.mu.Lock()
		if s.active[id] == a {
			delete(s.active, id)
		}
		s.mu.Unlock()
		close(a.gone)
	})
}

// track runs fn with a context that Cancel can cancel. A resume passes
// the run's reservation (own), which it lets go itself, and which its
// RunStarted marks started. A new run's entry is track's, made by fn's
// engine through creating, before anything can read the run from the
// journal (so no resume takes it for abandoned meanwhile); it holds the
// run's lease from its creation, and is let go when fn returns.
func (s *Service) track(ctx context.Context, own *activeRun, events func(engine.Event), fn func(ctx context.Context, events func(engine.Event), creating func(journal.ID)) (*journal.Run, error)) (*journal.Run, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var id journal.ID
	var mine *activeRun
	defer func() {
		if mine != nil {
			s.letGo(id, mine)
		}
	}()
	creating := func(run journal.ID) { // once, by a new run's engine (a resume's never calls it)
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, taken := s.active[run]; !taken {
			// Started from its creation: a resume is refused while the
			// journal has it running (or not yet), and waits once it ended.
			id, mine = run, &activeRun{cancel: cancel, started: true, held: true, gone: make(chan struct{})}
			s.active[id] = mine
		}
	}
	return fn(ctx, func(ev engine.Event) {
		if ev.Kind == engine.RunStarted && own != nil {
			s.mu.Lock()
			own.started = true // its cancel is ctx's parent's
			s.mu.Unlock()
		}
		if events != nil {
			events(ev)
		}
	}, creating)
}
