package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mcpflow/mcpflow/elicit"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/internal/didyoumean"
	"github.com/mcpflow/mcpflow/journal"
)

// AnswerRequest answers a question a server asked during a step's call
// (an elicitation) that the run waits for.
type AnswerRequest struct {
	// Run is a run id or a unique prefix of one; Step is the step's id.
	Run, Step string
	// Item picks the item of a for_each step (-1: the only one waiting).
	Item int
	// Key picks the question when the call asked several ("": the only
	// one unanswered).
	Key string
	// Action is elicit.Accept (with Fields or Content), elicit.Decline or
	// elicit.Cancel.
	Action string
	// Fields are NAME=VALUE pairs, converted to the types the question's
	// schema gives them; Content, when set, is the answer's content as is.
	Fields  []string
	Content map[string]any
	// By is who answered.
	By string
	// NoContinue only journals the answer. Otherwise an answer that leaves
	// the run nothing to wait for continues it where the journal is held,
	// as an approval does.
	NoContinue bool
	// Answered, when set, is handed the report once the answer is
	// journaled, before the run continues.
	Answered func(*AnswerReport)
	// Events receives the progress of the run the answer continues.
	Events func(engine.Event)
}

// AnswerReport is an answer as journaled, and what became of its run.
type AnswerReport struct {
	Run        *journal.Run
	Invocation journal.ID
	Question   *elicit.Question
	Answer     journal.Answer
	// Continues: the run has nothing left to wait for, and a resume
	// continues the call with the answers.
	Continues bool
	// Continued is the run as its continuation left it (nil when it was
	// not continued); NotContinued says why a run that Continues was not.
	Continued    *Report
	NotContinued error
}

// InputAnswered reports whether a run blocked for input has every question
// answered: a resume continues its calls.
func (r *Report) InputAnswered() bool {
	if r.Run.Status != journal.RunBlocked || r.Run.Error == nil || r.Run.Error.Code != engine.CodeInputRequired {
		return false
	}
	answered := false
	for i := range r.Invocations {
		w := r.Invocations[i].WaitingInput()
		if w == nil {
			continue
		}
		if open, err := w.Unanswered(); err != nil || len(open) > 0 {
			return false
		}
		answered = true
	}
	return answered
}

// WaitingInput lists the invocations of the run that wait for answers:
// a result asked for them, or the server asks during the call.
func (r *Report) WaitingInput() []journal.Invocation {
	var out []journal.Invocation
	for _, inv := range r.Invocations {
		if w := openInput(&inv); w != nil {
			if open, err := w.Unanswered(); err != nil || len(open) > 0 {
				out = append(out, inv)
			}
		}
	}
	return out
}

// openInput is the input inv waits for: asked by its result, or during its
// call; nil when none.
func openInput(inv *journal.Invocation) *journal.Input {
	if w := inv.WaitingInput(); w != nil {
		return w
	}
	return inv.AskedInCall()
}

// Answer journals an answer to a question the run waits for, checked
// against the question's schema first: who answered and when. It
// continues nothing (see Local.Answer). A step that waits for no answer
// (the error names those that do), a field the question does not ask, a
// value of the wrong type, or a secret field in a journal that does not
// encrypt its payloads (it could not keep the answer for the call) is an
// invalid request and writes nothing.
func (s *Service) Answer(req AnswerRequest) (*AnswerReport, error) {
	id, err := s.findRun(req.Run)
	if err != nil {
		return nil, err
	}
	rep, err := s.report(id, false)
	if err != nil {
		return nil, err
	}
	inv, err := waitingFor(rep, req)
	if err != nil {
		return nil, err
	}
	in := openInput(inv)
	reqs, err := in.Parsed()
	if err != nil {
		return nil, err
	}
	open, _ := in.Unanswered()
	key := req.Key
	if key == "" {
		if len(open) != 1 {
			return nil, invalid("step %s of run %s waits for %d answers (%s): say which with --request", req.Step, id.Short(), len(open), strings.Join(open, ", "))
		}
		key = open[0]
	}
	i := slices.IndexFunc(reqs, func(r journal.InputRequest) bool { return r.Key == key })
	switch {
	case i < 0:
		return nil, invalid("step %s of run %s asks no question %q%s", req.Step, id.Short(), key, suggest(key, open))
	case !slices.Contains(open, key):
		a := in.Answer(key)
		return nil, invalid("question %q of step %s was answered by %s at %s; an answer is final", key, req.Step, a.By, a.At.Format("2006-01-02T15:04:05Z07:00"))
	case reqs[i].Method != elicit.Method:
		return nil, invalid("question %q of step %s is a %s request, which mcpflow answers itself, not a person", key, req.Step, reqs[i].Method)
	}
	q, err := elicit.Parse(reqs[i].Params)
	if err != nil {
		return nil, invalid("step %s: %v", req.Step, err)
	}
	content := req.Content
	if req.Action == "" {
		req.Action = elicit.Accept
	}
	if req.Action == elicit.Accept && q.Mode == "url" && (len(req.Fields) > 0 || len(content) > 0) {
		return nil, invalid("step %s asks a person to open %s: its answer takes no fields (done, decline or cancel)", req.Step, q.URL)
	}
	if req.Action == elicit.Accept {
		if content == nil {
			if content, err = q.FromFields(req.Fields); err != nil {
				return nil, invalid("step %s: %v", req.Step, err)
			}
		}
		if err := q.Check(content); err != nil {
			return nil, invalid("step %s: %v", req.Step, err)
		}
		if fs, _ := q.Fields(); !s.j.Sealed() && slices.ContainsFunc(fs, func(f elicit.Field) bool { _, ok := content[f.Name]; return ok && f.Secret }) {
			return nil, invalid("step %s: the answer holds a secret field, and this journal does not encrypt payloads, so it cannot keep the answer for the call: open the journal with a key (see mcpflow journal --help)", req.Step)
		}
	} else if len(req.Fields) > 0 || req.Content != nil {
		return nil, invalid("a %s carries no fields", req.Action)
	}
	resp, err := elicit.Response(req.Action, content)
	if err != nil {
		return nil, invalid("%v", err)
	}
	got, err := s.j.Answer(inv.ID, in.Attempt, []journal.Answer{{Key: key, Response: resp, By: req.By}})
	if errors.Is(err, journal.ErrTransition) {
		return nil, invalid("%v", err)
	}
	if err != nil {
		return nil, err
	}
	after, err := s.report(id, false)
	if err != nil {
		return nil, err
	}
	return &AnswerReport{Run: after.Run, Invocation: inv.ID, Question: q, Answer: *got.Answer(key), Continues: after.InputAnswered()}, nil
}

// waitingFor finds the invocation of req's step that waits for answers.
func waitingFor(rep *Report, req AnswerRequest) (*journal.Invocation, error) {
	waiting := rep.WaitingInput()
	var steps, matches []string
	var found []*journal.Invocation
	for i := range waiting {
		inv := &waiting[i]
		steps = append(steps, inv.Step)
		if inv.Step == req.Step && (req.Item < 0 || inv.Item == req.Item) {
			found = append(found, inv)
			matches = append(matches, fmt.Sprint(inv.Item))
		}
	}
	switch {
	case len(waiting) == 0:
		return nil, invalid("run %s waits for no answer (it is %s)", rep.Run.ID.Short(), rep.Run.Status)
	case len(found) == 0:
		return nil, invalid("step %s of run %s waits for no answer; %s does%s", req.Step, rep.Run.ID.Short(), strings.Join(slices.Compact(steps), ", "), suggest(req.Step, steps))
	case len(found) > 1:
		return nil, invalid("items %s of step %s wait for answers: say which with --item", strings.Join(matches, ", "), req.Step)
	}
	return found[0], nil
}

// Answer journals an answer (Service.Answer), then continues the run here
// when the answer leaves it nothing to wait for, unless req.NoContinue:
// as Resume does, until the run ends or waits again.
func (l *Local) Answer(ctx context.Context, req AnswerRequest) (*AnswerReport, error) {
	rep, err := l.Service.Answer(req)
	if err != nil {
		return nil, err
	}
	if req.Answered != nil {
		req.Answered(rep)
	}
	if req.NoContinue || !rep.Continues {
		return rep, nil
	}
	var started atomic.Bool
	got, err := l.Resume(ctx, ResumeRequest{Run: rep.Run.ID.String(), By: req.By, Events: func(ev engine.Event) {
		if ev.Kind == engine.RunStarted {
			started.Store(true)
		}
		if req.Events != nil {
			req.Events(ev)
		}
	}})
	switch {
	case err == nil:
		rep.Continued = got
	case errors.Is(err, ErrRunning):
	case !started.Load():
		rep.NotContinued = err
	default:
		return nil, err
	}
	return rep, nil
}

// suggest is " (did you mean X?)" for the candidate closest to s, or "".
func suggest(s string, candidates []string) string {
	if c := didyoumean.Closest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}
