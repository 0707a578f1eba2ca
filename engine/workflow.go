package engine

import (
	"github.com/mcpflow/mcpflow/servers"
)

// Workflow is a validated workflow definition.
type Workflow struct {
	Name        string
	Description string
	Inputs      []*Input
	Servers     servers.Set
	Steps       []*Step
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
	// Secret inputs are redacted from the journal and from output.
	Secret bool
}

// InputType is the type of an input's value.
type InputType string

const (
	TypeString  InputType = "string"
	TypeNumber  InputType = "number"
	TypeBoolean InputType = "boolean"
)

// Step is one tool call of a workflow.
type Step struct {
	ID     string
	Server string
	Tool   string
	// With holds the arguments, possibly containing ${{ … }} expressions.
	With map[string]any
	pos  pos
}

type pos struct{ line, col int }

// Step returns the step with the given id, or nil.
func (w *Workflow) Step(id string) *Step {
	for _, s := range w.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}
