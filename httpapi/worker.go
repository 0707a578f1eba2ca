package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// pool returns the journal as a shared pool, if it is one.
func (s *Server) pool() (journal.Shared, bool) {
	j, err := s.svc.Journal()
	if err != nil {
		return nil, false
	}
	p, ok := j.(journal.Shared)
	return p, ok && p.Worker() != ""
}

// work claims free runs, up to MaxRuns going at once, every Poll, when a
// run is submitted here or freed anywhere, and when one of its runs ends,
// until Stop, and
// resumes each exactly as a crash is resumed: a call that was in
// flight in the worker that had it is a lost connection, replayed only
// where the replay rule clears it, otherwise outcome unknown.
func (s *Server) work(p journal.Shared) {
	defer s.working.Done()
	p.OnFreed(s.poke) // a run submitted or let go elsewhere: claim now
	t := time.NewTicker(s.o.Poll)
	defer t.Stop()
	for {
		select {
		case <-s.poked:
		default:
		}
		letGo := false
		if n := s.o.MaxRuns - int(s.going.Load()); n > 0 && !s.stopping.Load() {
			ids, err := p.Claim(n)
			if err != nil {
				s.logf("claim runs: %v", err)
			}
			letGo = s.takeOverAll(ids)
		}
		if letGo {
			// A run this worker could not resume, let go: its release
			// pokes every worker, this one too. Claiming again at once
			// would take it again, and fail again, as fast as the
			// database answers: look again at the next poll.
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
			continue
		}
		select {
		case <-s.quit:
			return
		case <-t.C:
		case <-s.poked:
		}
	}
}

// enqueue journals a run for any worker to claim (see service.Submit)
// and looks for free runs at once: this worker may well be the one.
func (s *Server) enqueue(trace context.Context, req service.RunRequest) (journal.ID, error) {
	id, err := s.svc.Submit(trace, req)
	if err != nil {
		return id, err
	}
	s.poke()
	return id, nil
}

// ended counts a run of this server out, and makes a worker claim at
// once a free run for the place it leaves, rather than at the next poll.
func (s *Server) ended() {
	s.going.Add(-1)
	s.poke()
}

// poke makes the worker look for free runs now (see work).
func (s *Server) poke() {
	select {
	case s.poked <- struct{}{}:
	default:
	}
}

// takeOvers is how many claimed runs a worker resumes at once. A resume
// waits on the journal (the run, its definition, its invocations, its
// status) until its run starts: in bench/workers (three workers, a
// hundred claimed runs each) they took a second or two to start one
// after another, 1.2–1.6 s eight at a time, about 0.85 s 32 at a time.
const takeOvers = 32

// takeOverAll resumes the runs claimed, takeOvers at a time, and returns
// once each has started or failed to; it says whether any was let go.
func (s *Server) takeOverAll(ids []journal.ID) (letGo bool) {
	var gone atomic.Bool
	var wg sync.WaitGroup
	sem := make(chan struct{}, takeOvers)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if s.takeOver(id) {
				gone.Store(true)
			}
		})
	}
	wg.Wait()
	return gone.Load()
}

// takeOver resumes a run this worker claimed. A run that cannot be
// resumed here at all (its workspace is not on this machine, its
// definition no longer loads against the servers configured) is blocked
// with the reason, so that it is not claimed over and over; an operator
// resumes it once the cause is fixed. On any other error (the database)
// the run is let go, for the next claim, and takeOver says so.
func (s *Server) takeOver(id journal.ID) (letGo bool) {
	s.logf("claimed run %s: resuming it", id.Short())
	// A worker trusts workspaces by its own trust store only: trust a
	// command gave with --trust-workspace does not travel.
	_, err := s.resume(s.base, service.ResumeRequest{Run: id.String(), Untrusted: true})
	if err == nil {
		return false
	}
	s.logf("resume claimed run %s: %v", id.Short(), err)
	switch {
	case errors.Is(err, service.ErrRunning):
		// Going here already: that resume holds it.
	case errors.Is(err, service.ErrCannotResume):
		if err := s.svc.Abandon(id, err); err != nil {
			s.logf("block run %s: %v", id.Short(), err)
		}
	default:
		s.svc.Release(id)
		return true
	}
	return false
}

// Worker is this server's worker id on a shared journal ("" otherwise).
func (s *Server) Worker() string {
	if p, ok := s.pool(); ok {
		return p.Worker()
	}
	return ""
}

// WorkerList is GET /api/workers: the workers registered on a shared
// journal, live ones first, with the runs each holds; Self is this
// server's worker id.
type WorkerList struct {
	Self    string           `json:"self"`
	Workers []journal.Worker `json:"workers"`
}

func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pool()
	if !ok {
		writeErr(w, fmt.Errorf("%w: workers share a PostgreSQL journal", service.ErrNotShared))
		return
	}
	ws, err := p.Workers()
	if err != nil {
		writeErr(w, err)
		return
	}
	if ws == nil {
		ws = []journal.Worker{}
	}
	writeJSON(w, http.StatusOK, WorkerList{Self: p.Worker(), Workers: ws})
}
