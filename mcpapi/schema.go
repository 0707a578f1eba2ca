package mcpapi

import (
	"github.com/mcpflow/mcpflow/workflow"
)

// InputSchema is the JSON Schema of a workflow's tool arguments, from its
// inputs: one property per input with its type, description, default and
// enum;
// an input declared secret is writeOnly (a client must not show it back);
// an input required and without a default is required. No other property
// is accepted (additionalProperties: false), as the workflow refuses an
// input it does not declare.
func InputSchema(wf *workflow.Workflow) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, in := range wf.Inputs {
		p := map[string]any{"type": string(in.Type)}
		if in.Description != "" {
			p["description"] = in.Description
		}
		if in.HasDefault && !in.Secret {
			// A secret's default stays out of a schema every client shows.
			p["default"] = in.Default
		}
		if in.Enum != nil && !in.Secret {
			// The values a secret takes stay out of it too.
			p["enum"] = in.Enum
		}
		if in.Secret {
			p["writeOnly"] = true
		}
		props[in.Name] = p
		if in.Required && !in.HasDefault {
			required = append(required, in.Name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}
