package api

import (
	"encoding/json"

	"github.com/mcpflow/mcpflow/replay"
)

// Tool is a server's tool: its annotations exactly as declared (absent
// fields absent; null when it has none) and the replay verdict a lost call
// of it would get under the current trust.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Annotations json.RawMessage `json:"annotations"`
	Replay      Replay          `json:"replay"`
}

// ToolDetail is a tool with its input and output schemas.
type ToolDetail struct {
	Tool
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
}

// Replay is a replay verdict.
type Replay struct {
	Safe   bool   `json:"safe"`
	Reason string `json:"reason"`
	// Declared is the verdict on the annotations alone, as if both trust
	// gates passed.
	Declared string `json:"declared"`
}

// ReplayOf is the shape of a verdict and of the declared reason.
func ReplayOf(d replay.Decision, declared replay.Reason) Replay {
	return Replay{Safe: d.Verdict == replay.Replay, Reason: string(d.Reason), Declared: string(declared)}
}

// ToolOf is a tool's shape.
func ToolOf(name, description string, annotations json.RawMessage, d replay.Decision, declared replay.Reason) Tool {
	if annotations == nil {
		annotations = json.RawMessage("null")
	}
	return Tool{Name: name, Description: description, Annotations: annotations, Replay: ReplayOf(d, declared)}
}

// ToolDetailOf is t with its schemas (null when absent).
func ToolDetailOf(t Tool, input, output json.RawMessage) ToolDetail {
	return ToolDetail{Tool: t, InputSchema: orNull(input), OutputSchema: orNull(output)}
}

func orNull(raw json.RawMessage) json.RawMessage {
	if IsNull(raw) {
		return json.RawMessage("null")
	}
	return raw
}
