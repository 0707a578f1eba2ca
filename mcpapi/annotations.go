package mcpapi

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/replay"
)

// StepHints is what is known of one step for a workflow's hints: a read
// (resource: or prompt:), a tool call whose server declared its
// annotations (Declared, as on the wire: nil when the tool sent none), or
// neither (Unknown: its server could not be reached, the tool is not
// listed, or its annotations do not parse).
type StepHints struct {
	Read     bool
	Unknown  bool
	Declared *replay.Annotations
}

// HintsOf is a tool step's StepHints from its tool's annotations as
// discovered (raw, as the server sent them); found is false when the
// server could not be asked or does not list the tool.
func HintsOf(raw json.RawMessage, found bool) StepHints {
	if !found {
		return StepHints{Unknown: true}
	}
	a, err := replay.ParseAnnotations(raw)
	if err != nil {
		return StepHints{Unknown: true}
	}
	if a == nil {
		a = &replay.Annotations{}
	}
	return StepHints{Declared: a}
}

// Annotate derives a workflow's tool annotations from its steps, honestly:
//
//   - readOnlyHint: every step reads (resource:, prompt:) or calls a tool
//     that declares readOnlyHint: true;
//   - idempotentHint: every step is read-only, or calls a tool that
//     declares idempotentHint: true;
//   - destructiveHint false: every step is read-only, or calls a tool
//     that declares destructiveHint: false; true otherwise (the default
//     of the protocol, and of a step not known);
//   - openWorldHint: true when a tool declares it true, false when every
//     step is a tool call that declares it false, absent otherwise.
//
// A step not known makes the workflow not read-only, not idempotent and
// destructive: the safe defaults. A workflow without steps claims nothing.
func Annotate(title string, steps []StepHints) *mcp.ToolAnnotations {
	readOnly, idempotent, nonDestructive := len(steps) > 0, len(steps) > 0, len(steps) > 0
	openTrue, allClosed := false, len(steps) > 0
	for _, s := range steps {
		stepRO, stepIdem, stepSafe := false, false, false
		switch {
		case s.Read:
			stepRO, stepIdem, stepSafe = true, true, true
			allClosed = false
		case s.Unknown || s.Declared == nil:
			allClosed = false
		default:
			a := s.Declared
			stepRO = a.ReadOnly == replay.True
			stepIdem = stepRO || a.Idempotent == replay.True
			stepSafe = stepRO || a.Destructive == replay.False
			switch a.OpenWorld {
			case replay.True:
				openTrue = true
				allClosed = false
			case replay.Absent:
				allClosed = false
			}
		}
		readOnly = readOnly && stepRO
		idempotent = idempotent && stepIdem
		nonDestructive = nonDestructive && stepSafe
	}
	out := &mcp.ToolAnnotations{Title: title, ReadOnlyHint: readOnly, IdempotentHint: idempotent}
	destructive := !nonDestructive
	out.DestructiveHint = &destructive
	switch {
	case openTrue:
		t := true
		out.OpenWorldHint = &t
	case allClosed:
		f := false
		out.OpenWorldHint = &f
	}
	return out
}
