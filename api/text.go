package api

import (
	"encoding/json"
	"strings"

	"github.com/mcpflow/mcpflow/journal"
)

// Texts are the text items of an MCP content list (its JSON), in order;
// nil when it holds none or is not a list.
func Texts(content json.RawMessage) []string {
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &items) != nil {
		return nil
	}
	var out []string
	for _, c := range items {
		if c.Type == "text" {
			out = append(out, c.Text)
		}
	}
	return out
}

// ContentText is a content list's text items joined by newlines: what
// expressions see as a step's text.
func ContentText(content json.RawMessage) string { return strings.Join(Texts(content), "\n") }

// OneLine is s on one line, its newlines spaces, cut to n characters with
// an ellipsis.
func OneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

// ToolError is the state label of a call that completed with a tool
// error: its state is completed, and its step failed.
const ToolError = "tool_error"

// StateLabel is an invocation's state as every view shows it: its state,
// or ToolError for a call that completed with a tool error.
func StateLabel(st journal.State, toolError bool) string {
	if st == journal.StateCompleted && toolError {
		return ToolError
	}
	return st.String()
}
