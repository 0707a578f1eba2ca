package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/elicit"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// questionForm is a question a run's call waits to have answered (an
// elicitation), as the run page's form asks it: one input per field of
// the server's schema.
type questionForm struct {
	Step    string
	Item    int // -1 for a plain step
	Key     string
	Message string
	// URL is where a person goes (a URL elicitation): the form then
	// offers Done instead of fields.
	URL    string
	Fields []elicit.Field
	// Open: the call waits with its connection open (the server asked
	// during the call), rather than stopped with the question journaled.
	Open bool
	// Approval: mcpflow's own question (sampling: approve: true), answered
	// by Approve or Decline.
	Approval bool
}

// questionsOf lists the unanswered elicitations of rep's calls.
func questionsOf(rep *service.Report) []questionForm {
	var out []questionForm
	for _, inv := range rep.WaitingInput() {
		in, open := inv.WaitingInput(), false
		if in == nil {
			in, open = inv.AskedInCall(), true
		}
		if in == nil {
			continue
		}
		reqs, err := in.Parsed()
		if err != nil {
			continue
		}
		for _, r := range reqs {
			if r.Method == engine.MethodApprove && in.Answer(r.Key) == nil {
				out = append(out, questionForm{Step: inv.Step, Item: inv.Item, Key: r.Key, Open: open, Approval: true,
					Message: "Send the server's sampling request to the provider?"})
				continue
			}
			if r.Method != elicit.Method || in.Answer(r.Key) != nil {
				continue
			}
			q, err := elicit.Parse(r.Params)
			if err != nil {
				continue
			}
			fields, _ := q.Fields()
			f := questionForm{Step: inv.Step, Item: inv.Item, Key: r.Key, Message: q.Message, Fields: fields, Open: open}
			if q.Mode == "url" {
				f.URL = q.URL
			}
			out = append(out, f)
		}
	}
	return out
}

// uiAnswer answers a question from the run page's form: the fields typed
// by the question's schema (an empty optional field is left out), or a
// decline or a cancel.
func (s *Server) uiAnswer(w http.ResponseWriter, r *http.Request) {
	if !s.formAllowed(w, r) {
		return
	}
	ref := r.PathValue("id")
	action := r.PostForm.Get("action")
	switch action {
	case elicit.Accept, elicit.Decline, elicit.Cancel:
	default:
		s.message(w, r, http.StatusBadRequest, "action: want accept, decline or cancel")
		return
	}
	item := -1
	if v := r.PostForm.Get("item"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.message(w, r, http.StatusBadRequest, "item: want a number")
			return
		}
		item = n
	}
	req := service.AnswerRequest{Run: ref, Step: r.PostForm.Get("step"), Item: item, Key: r.PostForm.Get("key"), Action: action, By: s.o.By}
	if action == elicit.Accept {
		for name, values := range r.PostForm {
			field, ok := strings.CutPrefix(name, "f.")
			if !ok || len(values) == 0 || values[0] == "" {
				continue
			}
			req.Fields = append(req.Fields, field+"="+values[0])
		}
	}
	rep, continued, err := s.answer(s.traceOf(r), req)
	if err != nil {
		if errors.Is(err, journal.ErrNotFound) {
			s.uiError(w, r, err)
			return
		}
		done(w, r, "/runs/"+ref, "error", "Not recorded: "+err.Error())
		return
	}
	text := fmt.Sprintf("Step %s answered (%s) by %s.", req.Step, action, rep.Answer.By)
	switch {
	case rep.NotContinued != nil:
		done(w, r, "/runs/"+rep.Run.ID.String(), "error", text+" The run did not go on: "+rep.NotContinued.Error()+". Resume it once that is fixed.")
		return
	case continued:
		text += " The run goes on."
	case rep.Run.Status == journal.RunRunning:
		text += " The call goes on with it."
	}
	done(w, r, "/runs/"+rep.Run.ID.String(), "ok", text)
}

// questionRow is one request a server made of a call, as the invocation
// page lists it: what was asked, and the answer, who gave it and when.
type questionRow struct {
	Attempt  int
	Method   string
	Text     string // the question's message, or what the request is
	URL      string
	Answer   string // the response, secret fields redacted; "" while unanswered
	By       string
	At       time.Time
	Answered bool
}

// questionRows lists inv's requests in the order asked.
func questionRows(inv *journal.Invocation) []questionRow {
	var out []questionRow
	for _, in := range api.RedactedInputs(inv) {
		reqs, err := in.Parsed()
		if err != nil {
			continue
		}
		for _, r := range reqs {
			row := questionRow{Attempt: in.Attempt, Method: r.Method, Text: r.Method}
			switch r.Method {
			case elicit.Method:
				if q, err := elicit.Parse(r.Params); err == nil {
					row.Text, row.URL = q.Message, q.URL
				}
			case engine.MethodApprove:
				row.Text = "Send the server's sampling request to the provider?"
			}
			if a := in.Answer(r.Key); a != nil {
				row.Answered, row.Answer, row.By, row.At = true, prettyJSON(a.Response), a.By, a.At
			}
			out = append(out, row)
		}
	}
	return out
}
