package engine

import (
	"encoding/json"
	"strings"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/workflow"
)

// redact is what the journal keeps of JSON: as it is when the journal
// encrypts payloads (Sealed), else with the values of secret inputs
// removed.
func (r *runner) redact(b json.RawMessage) json.RawMessage {
	if r.j.Sealed() {
		return b
	}
	return r.redactAlways(b)
}

// redactAlways removes the values of secret inputs from JSON.
func (r *runner) redactAlways(b json.RawMessage) json.RawMessage {
	if len(r.secrets) == 0 {
		return b
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return json.RawMessage(`"` + workflow.Redacted + `"`)
	}
	out, _ := json.Marshal(workflow.RedactValue(v, r.secrets))
	return out
}

// scrub removes the values of secret inputs from text bound for the
// journal or for output (tool error text, upstream errors, results).
func (r *runner) scrub(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, workflow.Redacted)
	}
	return s
}

func (r *runner) scrubError(e *journal.Error) *journal.Error {
	if e == nil || len(r.secrets) == 0 || e.Code == replay.Code {
		return e // the stable error holds no secret, and must read the same always
	}
	return &journal.Error{Code: e.Code, Message: r.scrub(e.Message)}
}

// emit reports an event with secrets scrubbed from its text.
func (r *runner) emit(ev Event) {
	if len(r.secrets) > 0 {
		ev.Text, ev.Message, ev.Err = r.scrub(ev.Text), r.scrub(ev.Message), r.scrubError(ev.Err)
	}
	r.e.emit(ev)
}

// scrubbing is the journal as a run writes it: every error text and failure
// detail goes through scrub first, so no secret reaches the file.
type scrubbing struct {
	Journal
	r *runner
}

func (s scrubbing) Finish(in journal.Intent, o journal.Outcome) error {
	o.Error, o.Detail = s.r.scrubError(o.Error), s.r.scrub(o.Detail)
	return s.r.settled(s.Journal.Finish(in, o))
}

func (s scrubbing) Interrupted(id journal.ID, o journal.Outcome) error {
	o.Error, o.Detail = s.r.scrubError(o.Error), s.r.scrub(o.Detail)
	return s.r.settled(s.Journal.Interrupted(id, o))
}

func (s scrubbing) Decide(id journal.ID, d journal.Decision, st journal.State, e *journal.Error) error {
	return s.r.settled(s.Journal.Decide(id, d, st, s.r.scrubError(e)))
}

func (s scrubbing) EndRun(id journal.ID, st journal.RunStatus, e *journal.Error, outputs map[string]any) (*journal.Run, error) {
	run, err := s.Journal.EndRun(id, st, s.r.scrubError(e), outputs)
	return run, s.r.settled(err)
}

// secretHolder is a session that keeps what its server says for people to
// read (a server log), and scrubs from it the secret values lent to it
// until release is called. A session shared by several runs scrubs the
// secrets of all of them. mcpSession is one; sessions that are not show
// people nothing of their server. The run keys its loans by the holder:
// an implementation must be comparable (a pointer, a struct of pointers).
type secretHolder interface {
	HoldSecrets(values []string) (release func())
}

var _ secretHolder = mcpSession{}

func (m mcpSession) HoldSecrets(values []string) func() { return m.s.HoldSecrets(values) }

// lendSecrets lends the run's secrets to a session it is about to call
// through, once per session: from before the run's first call through it
// to the run's end.
func (r *runner) lendSecrets(s Session) {
	h, ok := s.(secretHolder)
	if !ok || len(r.secrets) == 0 {
		return
	}
	r.dmu.Lock()
	defer r.dmu.Unlock()
	if r.lent[h] != nil {
		return
	}
	if r.lent == nil {
		r.lent = map[secretHolder]func(){}
	}
	r.lent[h] = h.HoldSecrets(r.secrets)
}

// returnSecrets ends the run's loans, when nothing of the run calls any
// more. Each release first lets what the server said reach its log
// scrubbed.
func (r *runner) returnSecrets() {
	r.dmu.Lock()
	lent := r.lent
	r.lent = nil
	r.dmu.Unlock()
	for _, release := range lent {
		release()
	}
}
