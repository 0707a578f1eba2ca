package httpapi

import (
	"net/http"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// routeJournal adds the engine's journal to mux: one request per write of
// engine.Journal (POST /api/journal/OP), the records the engine reads, and
// what it asks besides (sealed, digest), and the events of its runs, for
// a process that runs the
// engine on its own server sessions while this one holds the journal
// (client.Journal: mcpflow proxy). Each write answers once the store
// returned it: durable. They write raw records, with none of the
// service's checks: they are the owner's own, served on the unix socket
// only (mode 0600, the socket's owner is the journal's), never on a TCP
// listener, where a browser or an agent could forge journal records.
func (s *Server) routeJournal(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/journal", func(w http.ResponseWriter, r *http.Request) {
		j, err := s.svc.Journal()
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, api.JournalInfo{Sealed: j.Sealed()})
	})
	mux.HandleFunc("POST /api/journal/digest", journalCall(s, func(j journal.Store, req *api.DigestRequest) (any, error) {
		return api.DigestAnswer{Digest: j.Digest(req.Data)}, nil
	}))
	mux.HandleFunc("POST /api/journal/create-run", journalCall(s, func(j journal.Store, req *api.CreateRunRequest) (any, error) {
		if req.Run == nil {
			return nil, badRequest("run is required")
		}
		if err := j.CreateRun(req.Run); err != nil {
			return nil, err
		}
		return api.RunWritten{Run: req.Run}, nil
	}))
	mux.HandleFunc("POST /api/journal/set-run-status", journalCall(s, func(j journal.Store, req *api.EndRunRequest) (any, error) {
		return wrote(j.SetRunStatus(req.ID, req.Status, req.Error))
	}))
	mux.HandleFunc("POST /api/journal/end-run", journalCall(s, func(j journal.Store, req *api.EndRunRequest) (any, error) {
		run, err := j.EndRun(req.ID, req.Status, req.Error, req.Outputs)
		if err != nil {
			return nil, err
		}
		return api.RunWritten{Run: run}, nil
	}))
	mux.HandleFunc("POST /api/journal/request-approval", journalCall(s, func(j journal.Store, req *api.RequestApprovalRequest) (any, error) {
		return j.RequestApproval(req.Run, req.Step, req.Message)
	}))
	mux.HandleFunc("POST /api/journal/begin", journalCall(s, func(j journal.Store, req *api.InvocationRequest) (any, error) {
		if req.Invocation == nil {
			return nil, badRequest("invocation is required")
		}
		in, err := j.Begin(req.Invocation)
		if err != nil {
			return nil, err
		}
		return api.Begun{Invocation: req.Invocation, Intent: api.IntentOf(in)}, nil
	}))
	mux.HandleFunc("POST /api/journal/skip", journalCall(s, func(j journal.Store, req *api.InvocationRequest) (any, error) {
		if req.Invocation == nil {
			return nil, badRequest("invocation is required")
		}
		if err := j.Skip(req.Invocation); err != nil {
			return nil, err
		}
		return api.InvocationWritten{Invocation: req.Invocation}, nil
	}))
	mux.HandleFunc("POST /api/journal/again", journalCall(s, func(j journal.Store, req *api.AgainRequest) (any, error) {
		in, err := j.Again(req.ID, req.Next.NextAttempt())
		if err != nil {
			return nil, err
		}
		return api.IntentOf(in), nil
	}))
	mux.HandleFunc("POST /api/journal/finish", journalCall(s, func(j journal.Store, req *api.FinishRequest) (any, error) {
		// The client read this Intent from Begin's or Again's answer;
		// Finish checks it against the invocation's open attempt.
		return wrote(j.Finish(journal.Relayed(req.Intent.Intent()), req.Outcome.Outcome()))
	}))
	mux.HandleFunc("POST /api/journal/interrupted", journalCall(s, func(j journal.Store, req *api.InterruptedRequest) (any, error) {
		return wrote(j.Interrupted(req.ID, req.Outcome.Outcome()))
	}))
	mux.HandleFunc("POST /api/journal/decide", journalCall(s, func(j journal.Store, req *api.DecideRequest) (any, error) {
		return wrote(j.Decide(req.ID, req.Decision, req.State, req.Error))
	}))
	mux.HandleFunc("POST /api/journal/ask", journalCall(s, func(j journal.Store, req *api.AskRequest) (any, error) {
		return wrote(j.Ask(req.ID, req.Attempt, req.Input))
	}))
	mux.HandleFunc("POST /api/journal/answer", journalCall(s, func(j journal.Store, req *api.AnswerInputRequest) (any, error) {
		return j.Answer(req.ID, req.Attempt, req.Answers)
	}))
	mux.HandleFunc("POST /api/journal/event", journalCall(s, func(_ journal.Store, e *api.Event) (any, error) {
		// An event of a run going in the writer's process (a proxy
		// session), for whoever follows runs here: the UI, runs watch.
		ev, err := service.EngineEvent(*e)
		if err != nil {
			return nil, badRequest("event: %v", err)
		}
		s.hub.publish(service.EventOf(ev))
		return api.Done{OK: true}, nil
	}))
	mux.HandleFunc("GET /api/journal/runs/{id}", journalRead(s, func(j journal.Store, id journal.ID) (any, error) {
		return j.Run(id)
	}))
	mux.HandleFunc("GET /api/journal/runs/{id}/invocations", journalRead(s, func(j journal.Store, id journal.ID) (any, error) {
		invs, err := j.RunInvocations(id)
		if invs == nil {
			invs = []journal.Invocation{}
		}
		return api.RunInvocations{Invocations: invs}, err
	}))
	mux.HandleFunc("GET /api/journal/invocations/{id}", journalRead(s, func(j journal.Store, id journal.ID) (any, error) {
		return j.Invocation(id)
	}))
}

// journalCall is the handler of a journal request R: fn's answer, or its
// error as a code (service.CodeOf), as every other handler answers.
func journalCall[R any](s *Server, fn func(journal.Store, *R) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.journalUsed.Store(time.Now().UnixNano())
		var req R
		if !readJSON(w, r, &req) {
			return
		}
		j, err := s.svc.Journal()
		if err != nil {
			writeErr(w, err)
			return
		}
		out, err := fn(j, &req)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// journalRead is the handler of a read of the record {id} (a whole id, not
// a prefix).
func journalRead(s *Server, fn func(journal.Store, journal.ID) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := journal.ParseID(r.PathValue("id"))
		if err != nil {
			writeErr(w, badRequest("id %q: %v", r.PathValue("id"), err))
			return
		}
		j, err := s.svc.Journal()
		if err != nil {
			writeErr(w, err)
			return
		}
		out, err := fn(j, id)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// wrote answers a write that returns only its error.
func wrote(err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return api.Done{OK: true}, nil
}

// JournalUsed is when another process last wrote the journal through this
// one (client.Journal): zero when none has.
func (s *Server) JournalUsed() time.Time {
	n := s.journalUsed.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
