package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/upstream"
)

// Workflow is a validated workflow definition.
type Workflow struct {
	Name        string
	Description string
	Inputs      []*Input
	// Env lists the environment variables expressions may read as env.NAME;
	// no other variable is visible.
	Env []string
	// Servers are the servers steps can use: the external configuration
	// merged with the workflow's own servers: section (Own), which wins.
	Servers upstream.Set
	Own     upstream.Set
	// Roots, when not nil, are the workflow's roots: given to every server
	// of Servers whose entry declares none (see upstream.Server.Roots);
	// nil leaves those servers the workspace.
	Roots   []string
	Steps   []*Step
	Outputs []*Output
	// Path is where the definition was read from; Source its exact bytes
	// (journaled with every run, so resume never depends on the file).
	Path   string
	Source []byte
}

// Input is a declared workflow input.
type Input struct {
	Name        string
	Type        InputType
	Description string
	Required    bool
	Default     any
	HasDefault  bool
	// Enum, when not nil, lists the only values the input takes, typed
	// as the input is; a default is one of them.
	Enum []any
	// Secret inputs are redacted from the journal and from output.
	Secret bool
}

// InputType is the type of an input's value.
type InputType string

const (
	TypeString  InputType = "string"
	TypeNumber  InputType = "number"
	TypeBoolean InputType = "boolean"
	TypeObject  InputType = "object"
	TypeArray   InputType = "array"
)

// Step is one request of a workflow — a tool call, a resource read or a
// prompt get — or one per item with ForEach.
type Step struct {
	ID     string
	Name   string
	Server string
	// Exactly one of Tool, Resource and Prompt is set: the tool a
	// tools/call calls, the URI a resources/read reads (possibly with
	// ${{ … }} expressions; it yields a string), or the prompt a
	// prompts/get gets. Method says which.
	Tool     string
	Resource *Value
	Prompt   string
	// resourceText is resource: as written.
	resourceText string
	// With holds the arguments, possibly containing ${{ … }} expressions:
	// a tool's, or a prompt's (whose values are strings: see
	// PromptArguments). A resource read has none.
	With *Value
	// Args, when set, are the arguments exactly as a client sent them
	// (mcpflow proxy): never written in YAML, sent byte for byte instead
	// of With.
	Args json.RawMessage
	// If, when set, must be true for the step to run; otherwise it is
	// journaled as skipped.
	If *Expression
	// ForEach, when set, yields a list; the step runs once per item, with
	// at most Concurrency calls in flight.
	ForEach     *Value
	Concurrency int
	// Timeout bounds each call (0: none). A call that times out may have
	// run: it is retried only when Retry asks and the replay policy agrees.
	Timeout time.Duration
	Retry   Retry
	// ContinueOnError lets the run go on when this step fails; later
	// steps see steps.ID.isError.
	ContinueOnError bool
	// Approve: the run stops before the step's first intent is written
	// until an operator approves the step (mcpflow approve) or rejects it
	// (the step then fails). One approval covers every item of a for_each.
	// ApproveMessage is shown to the approver ("" for approve: true).
	Approve        bool
	ApproveMessage string
	// Elicit answers the server's questions during the step's call
	// (elicitation): ElicitAction is "accept" with the fields Elicit
	// evaluates to, "decline" or "cancel"; "" when the step declares no
	// answer, and the run then waits for an operator's (mcpflow answer).
	Elicit       *Value
	ElicitAction string
	// at is where the step's server: and its tool:, resource: or prompt:
	// are written (zero for a step built in Go): an error found after
	// Load points there.
	at struct{ server, tool position }
}

// Method is the request the step sends: journal.MethodCall for tool:,
// MethodRead for resource:, MethodPrompt for prompt:.
func (s *Step) Method() journal.Method {
	switch {
	case s.Resource != nil:
		return journal.MethodRead
	case s.Prompt != "":
		return journal.MethodPrompt
	}
	return journal.MethodCall
}

// Target is what the step's request addresses, as written: the tool's
// name, the prompt's, or the resource's URI (with its ${{ … }}
// expressions unevaluated).
func (s *Step) Target() string {
	switch {
	case s.Resource != nil:
		return s.resourceText
	case s.Prompt != "":
		return s.Prompt
	}
	return s.Tool
}

// LiteralResource is the URI a resource step reads when it holds no
// expression (ok false otherwise, or for a step that reads none).
func (s *Step) LiteralResource() (uri string, ok bool) {
	if s.Resource == nil || s.Resource.HasExpressions() {
		return "", false
	}
	v, err := s.Resource.Eval(context.Background(), Vars{})
	uri, ok = v.(string)
	return uri, ok && err == nil
}

// PromptArguments are a prompt step's arguments as MCP sends them: with:
// evaluated (args), each value a string. A number or a boolean is sent as
// its text; null, a list or a mapping is an error naming the argument.
func PromptArguments(args any) (map[string]string, error) {
	m, ok := args.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("prompt arguments are %s, not a mapping", Text(args))
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch v.(type) {
		case string, float64, bool, int, int64:
			out[k] = Text(v)
		default:
			return nil, fmt.Errorf("prompt argument %s is %s, not a string (prompt arguments are strings)", k, kindOf(v))
		}
	}
	return out, nil
}

// kindOf names the JSON kind of v, never its value (it may be a secret).
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return "not text"
}

// CheckPromptArguments checks a prompt step's arguments by name against
// the prompt (validate --discover): every required one is given, no other
// than those it takes.
func CheckPromptArguments(st *Step, p upstream.Prompt) error {
	var names []string
	if st.With != nil {
		names = st.With.keys
	}
	return p.CheckArguments(names)
}

// Retry says how often to try a call again after a tool error (isError).
type Retry struct {
	// Attempts is the total number of attempts (1: no retry).
	Attempts int
	// Backoff is the delay before the second attempt; it doubles after.
	Backoff time.Duration
}

// Output is a named value computed when the run succeeds.
type Output struct {
	Name  string
	Value *Value
}

// Step returns the step with the given id, or nil.
func (w *Workflow) Step(id string) *Step {
	for _, s := range w.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// CheckLiteralArguments validates a step's arguments against the tool's
// input schema when they hold no expression (arguments with expressions
// are validated before each call instead).
func CheckLiteralArguments(st *Step, tool upstream.Tool) error {
	if st.With != nil && st.With.HasExpressions() {
		return nil
	}
	args := []byte("{}")
	if st.With != nil {
		v, err := st.With.Eval(context.Background(), Vars{})
		if err != nil {
			return err
		}
		if args, err = json.Marshal(v); err != nil {
			return err
		}
	}
	return tool.Validate(args)
}

// CheckRoots checks, for every server a step uses, that its roots name
// existing directories, relative ones taken relative to workspace: what
// connecting would find, without starting anything. The problems are one
// Errors, each at the root it is about.
func (w *Workflow) CheckRoots(workspace string) error {
	var errs []*PosError
	seen := map[string]bool{}
	for _, st := range w.Steps {
		srv, ok := w.Servers[st.Server]
		if !ok || seen[st.Server] {
			continue
		}
		seen[st.Server] = true
		err := srv.CheckRoots(workspace)
		if ce := (*upstream.ConfigError)(nil); errors.As(err, &ce) {
			file := ce.File
			if file == "" {
				file = w.Path
			}
			errs = append(errs, &PosError{File: file, Line: ce.Line, Column: ce.Column, Msg: ce.Message()})
		}
	}
	return Join(errs...)
}

// StepError is err, found for step st after Load (by validate --discover),
// at the place in the workflow's file it is about: the argument a
// *upstream.ArgsError names (or the nearest value around it that is
// written: with:, else tool: or prompt:), the step's tool:, resource: or
// prompt: for upstream.ErrUnknownTool, ErrUnknownResource and
// ErrUnknownPrompt, else its server:. The message is "step ID: err".
func (w *Workflow) StepError(st *Step, err error) *PosError {
	at := st.at.server
	var ae *upstream.ArgsError
	switch {
	case errors.As(err, &ae):
		at = st.at.tool
		if st.With != nil {
			at = st.With.find(ae.Field)
		}
	case errors.Is(err, upstream.ErrUnknownTool), errors.Is(err, upstream.ErrUnknownResource), errors.Is(err, upstream.ErrUnknownPrompt):
		at = st.at.tool
	}
	return &PosError{File: w.Path, Line: at.line, Column: at.col, Msg: fmt.Sprintf("step %s: %v", st.ID, err)}
}

// find is the position of the value at field, an argument path as
// upstream.ArgsError names it ("address.zip", "tags[2]", "tags[]" for any
// item): of the deepest value on that path that is written.
func (v *Value) find(field string) position {
	at := v.at
	for field != "" && v != nil {
		var name string
		if field[0] == '[' {
			end := strings.IndexByte(field, ']')
			if end < 0 {
				break
			}
			name, field = field[:end+1], field[end+1:]
		} else {
			end := strings.IndexAny(field, ".[")
			if end < 0 {
				end = len(field)
			}
			name, field = field[:end], field[end:]
		}
		field = strings.TrimPrefix(field, ".")
		switch {
		case v.mapping != nil && !strings.HasPrefix(name, "["):
			v = v.mapping[name]
		case v.sequence != nil && strings.HasPrefix(name, "["):
			i, err := strconv.Atoi(name[1 : len(name)-1])
			if err != nil || i < 0 || i >= len(v.sequence) {
				return at // "[]": any item of the list
			}
			v = v.sequence[i]
		default:
			return at
		}
		if v != nil && v.at.line > 0 {
			at = v.at
		}
	}
	return at
}

// HasExpressions reports whether v holds a ${{ … }} expression anywhere.
func (v *Value) HasExpressions() bool { return len(v.exprs()) > 0 }

// Literal is a value sent exactly as given: strings in it are never read
// as expressions.
func Literal(v any) *Value { return &Value{literal: jsonShape(v)} }

// RedactInputs returns inputs with the values of secret inputs replaced by
// Redacted.
func (w *Workflow) RedactInputs(inputs map[string]any) map[string]any {
	out := make(map[string]any, len(inputs))
	for k, v := range inputs {
		if in := w.Input(k); in != nil && in.Secret {
			v = Redacted
		}
		out[k] = v
	}
	return out
}

// Redacted stands in for a secret value in the journal and in output.
const Redacted = "[redacted]"

// SecretInputs names the inputs declared secret, in declaration order.
func (w *Workflow) SecretInputs() []string {
	var out []string
	for _, in := range w.Inputs {
		if in.Secret {
			out = append(out, in.Name)
		}
	}
	return out
}

// SecretValues are the values of a run's secret inputs, as text, for
// redaction: names lists the secret inputs, inputs holds their values.
func SecretValues(names []string, inputs map[string]any) []string {
	var out []string
	for _, n := range names {
		out = append(out, leafTexts(inputs[n])...)
	}
	return out
}

// leafTexts are the texts of a value's leaves: a secret object or list is
// secret in every part (a password inside credentials), and is redacted
// part by part wherever a part appears.
func leafTexts(v any) []string {
	switch x := v.(type) {
	case nil, bool:
		return nil
	case map[string]any:
		var out []string
		for _, e := range x {
			out = append(out, leafTexts(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, leafTexts(e)...)
		}
		return out
	}
	if t := Text(v); t != "" && t != Redacted {
		return []string{t}
	}
	return nil
}

// RedactValue replaces the secret values in a JSON-shaped value where it is
// shown: in strings every occurrence, other values when their text is a
// secret. It changes maps and lists in place and returns the result.
func RedactValue(v any, secrets []string) any {
	if len(secrets) == 0 {
		return v
	}
	switch x := v.(type) {
	case string:
		for _, s := range secrets {
			x = strings.ReplaceAll(x, s, Redacted)
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = RedactValue(e, secrets)
		}
	case []any:
		for i, e := range x {
			x[i] = RedactValue(e, secrets)
		}
	default:
		for _, s := range secrets {
			if Text(x) == s {
				return Redacted
			}
		}
	}
	return v
}

// RedactJSON is RedactValue on JSON text; text that is not JSON is
// replaced whole.
func RedactJSON(b []byte, secrets []string) []byte {
	if len(secrets) == 0 || len(b) == 0 {
		return b
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return []byte(`"` + Redacted + `"`)
	}
	out, _ := json.Marshal(RedactValue(v, secrets))
	return out
}

// StepRefs lists the earlier steps whose results v reads (sorted, once
// each): a value that reads none can be evaluated before the run.
func (v *Value) StepRefs() []string {
	if v == nil {
		return nil
	}
	var out []string
	for _, e := range v.exprs() {
		out = append(out, e.StepRefs()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// StepRefs lists the earlier steps whose results e reads.
func (e *Expression) StepRefs() []string {
	if e == nil {
		return nil
	}
	return slices.Clone(e.refs.steps)
}
