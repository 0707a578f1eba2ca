package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// started is how a run started in the background reports back: its id
// once it is journaled, or why it could not start.
type started struct {
	id  journal.ID
	err error
}

// traceOf is the server's base context with the trace context of r's
// headers (traceparent, tracestate, baggage), which a run started for r
// joins: cancellation still comes from the server, never from r.
func (s *Server) traceOf(r *http.Request) context.Context {
	return otel.GetTextMapPropagator().Extract(s.base, propagation.HeaderCarrier(r.Header))
}

// submit starts a workflow in the background and returns its run id once
// the run is journaled. The run belongs to the server: Stop waits for it.
// trace carries the trace context the request came with (see traceOf).
func (s *Server) submit(trace context.Context, req service.RunRequest) (journal.ID, error) {
	return s.launch(trace, func(ctx context.Context, events func(engine.Event)) error {
		req.Events = events
		_, err := s.svc.Run(ctx, req)
		return err
	})
}

// resume continues a run in the background; see submit.
func (s *Server) resume(trace context.Context, req service.ResumeRequest) (journal.ID, error) {
	return s.launch(trace, func(ctx context.Context, events func(engine.Event)) error {
		req.Events = events
		rep, err := s.svc.Resume(ctx, req)
		if err == nil && !rep.Acted {
			return errNothingToResume{rep.Run}
		}
		return err
	})
}

// approve journals a decision on a step's approval gate, tells the event
// stream, and continues in the background, as resume does, the run the
// decision leaves nothing to wait for, unless req.NoContinue: the report
// says whether it did (Continued, without the run's end: it goes on here),
// or why not. A run going already (here, or in another worker) is left to
// go on.
func (s *Server) approve(trace context.Context, req service.ApproveRequest) (rep *service.ApproveReport, continued bool, err error) {
	if rep, err = s.svc.Decide(req); err != nil {
		return nil, false, err
	}
	s.hub.publish(api.Event{Kind: api.EventApproval, Run: rep.Run.ID.String(), Workflow: rep.Run.Workflow,
		Step: rep.Approval.Step, State: rep.Approval.State.String(), Text: rep.Approval.Reason, At: time.Now().UTC()})
	err = rep.Continue(req, func() (*service.Report, bool, error) {
		_, err := s.resume(trace, service.ResumeRequest{Run: rep.Run.ID.String(), By: req.By})
		continued = err == nil
		// Before its start, or not at all: launch logs what comes after.
		return nil, false, err
	})
	return rep, continued, err
}

// answer journals an answer (service.Answer), publishes it, and
// continues in the background the run it leaves nothing to wait for,
// unless req.NoContinue, as approve does.
func (s *Server) answer(trace context.Context, req service.AnswerRequest) (rep *service.AnswerReport, continued bool, err error) {
	if rep, err = s.svc.Answer(req); err != nil {
		return nil, false, err
	}
	s.hub.publish(api.Event{Kind: api.EventAnswer, Run: rep.Run.ID.String(), Workflow: rep.Run.Workflow,
		Step: req.Step, Text: rep.Answer.By + " answered " + rep.Answer.Key, At: time.Now().UTC()})
	if req.NoContinue || !rep.Continues {
		return rep, false, nil
	}
	_, err = s.resume(trace, service.ResumeRequest{Run: rep.Run.ID.String(), By: req.By})
	switch {
	case err == nil:
		continued = true
	case errors.Is(err, service.ErrRunning):
	default:
		rep.NotContinued = err
	}
	return rep, continued, nil
}

// call makes one journaled tool call in the background; see submit.
func (s *Server) call(trace context.Context, req service.CallRequest) (journal.ID, error) {
	return s.launch(trace, func(ctx context.Context, events func(engine.Event)) error {
		req.Events = events
		_, err := s.svc.Call(ctx, req)
		return err
	})
}

// errNothingToResume: the run succeeded, or waits for an operator.
type errNothingToResume struct{ run *journal.Run }

func (e errNothingToResume) Error() string {
	return "run " + e.run.ID.Short() + " is " + e.run.Status.String() + ": nothing to resume"
}

func (e errNothingToResume) Unwrap() error { return service.ErrNothingToResume }

func (e errNothingToResume) Fields() map[string]string {
	return map[string]string{"run": e.run.ID.String(), "status": e.run.Status.String()}
}

// launch runs fn in a goroutine the server owns, publishing its events,
// and returns once its run is journaled (its RunStarted event) or fn
// failed before.
func (s *Server) launch(trace context.Context, fn func(ctx context.Context, events func(engine.Event)) error) (journal.ID, error) {
	if err := s.busy(); err != nil {
		return journal.ID{}, err
	}
	if s.stopping.Load() {
		return journal.ID{}, ErrStopping
	}
	ch := make(chan started, 1)
	s.runs.Add(1)
	s.going.Add(1)
	go func() {
		defer s.runs.Done()
		defer s.ended()
		announced := false
		err := fn(trace, func(ev engine.Event) {
			if ev.Kind == engine.RunStarted && !announced {
				announced = true
				ch <- started{id: ev.Run}
			}
			s.hub.publish(service.EventOf(ev))
		})
		if !announced {
			if err == nil {
				err = errors.New("the run did not start")
			}
			ch <- started{err: err}
			return
		}
		if err != nil {
			s.logf("run: %v", err)
		}
	}()
	st := <-ch
	return st.id, st.err
}
