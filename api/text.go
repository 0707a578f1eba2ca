package api

import (
	"encoding/json"
	"strconv"
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

// AwaitingInput labels an invocation whose call waits for an answer to a
// question its server asked (an elicitation): its state is intent.
const AwaitingInput = "awaiting_input"

// InvocationState is inv's state as every view shows it: StateLabel, or
// AwaitingInput for a call that waits for an answer.
func InvocationState(inv *journal.Invocation) string {
	if inv.WaitingInput() != nil || inv.AskedInCall() != nil {
		return AwaitingInput
	}
	return StateLabel(inv.State, inv.ToolError)
}

// KindText names why an attempt was sent, as every view words it: "first
// send", "retry" (the step's retry:), "replay" (the replay rule, after a
// lost connection), "first delivery", "operator retry".
func KindText(k journal.AttemptKind) string {
	if k == journal.KindFirst {
		return "first send"
	}
	return strings.ReplaceAll(k.String(), "_", " ")
}

// AttemptsText is an invocation's attempts as every view counts them: how
// many, and why those after the first were sent, each kind on its own —
// "1", "2 (1 replay)", "3 (1 retry, 1 operator retry)".
func AttemptsText(inv *journal.Invocation) string {
	t := inv.Tally()
	var parts []string
	for _, c := range []struct {
		n         int
		one, many string
	}{
		{t.Retries, "retry", "retries"},
		{t.Replays, "replay", "replays"},
		{t.FirstDeliveries, "first delivery", "first deliveries"},
		{t.OperatorRetries, "operator retry", "operator retries"},
	} {
		switch {
		case c.n == 1:
			parts = append(parts, "1 "+c.one)
		case c.n > 1:
			parts = append(parts, strconv.Itoa(c.n)+" "+c.many)
		}
	}
	if len(parts) == 0 {
		return strconv.Itoa(t.Attempts)
	}
	return strconv.Itoa(t.Attempts) + " (" + strings.Join(parts, ", ") + ")"
}

// Target is what a request addresses, as every view names it where it
// shows a tool: "SERVER/TOOL" for a tools/call, "resource SERVER URI" for a
// resources/read, "prompt SERVER NAME" for a prompts/get (name is
// journal.Invocation.Tool).
func Target(m journal.Method, server, name string) string {
	switch m {
	case journal.MethodRead:
		return "resource " + server + " " + name
	case journal.MethodPrompt:
		return "prompt " + server + " " + name
	}
	return server + "/" + name
}

// TargetName is Target without the server, where a view shows the server
// beside it: the tool's name, "resource URI", "prompt NAME".
func TargetName(m journal.Method, name string) string {
	switch m {
	case journal.MethodRead:
		return "resource " + name
	case journal.MethodPrompt:
		return "prompt " + name
	}
	return name
}

// TargetOf is Target of an invocation.
func TargetOf(inv *journal.Invocation) string { return Target(inv.Method, inv.Server, inv.Tool) }

// ResultText is a result's text, as every view shows it and as
// expressions see it (steps.ID.text), by the request's method: a tool's
// text content items; a resource's contents that have a text; a prompt's
// messages whose content is text — each joined by newlines.
func ResultText(m journal.Method, content, structured json.RawMessage) string {
	switch m {
	case journal.MethodRead:
		var res struct {
			Contents []struct {
				Text *string `json:"text"`
			} `json:"contents"`
		}
		json.Unmarshal(structured, &res)
		var out []string
		for _, c := range res.Contents {
			if c.Text != nil {
				out = append(out, *c.Text)
			}
		}
		return strings.Join(out, "\n")
	case journal.MethodPrompt:
		var res struct {
			Messages []struct {
				Content struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(structured, &res)
		var out []string
		for _, m := range res.Messages {
			if m.Content.Type == "text" {
				out = append(out, m.Content.Text)
			}
		}
		return strings.Join(out, "\n")
	}
	return ContentText(content)
}
