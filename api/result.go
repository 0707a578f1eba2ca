package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpflow/mcpflow/journal"
)

// ParseResult reads a tool result an operator gives (journal resolve
// --result, the API's resolve): the MCP spelling (content,
// structuredContent, isError) and the journal's own (structured_content,
// is_error, as -o json prints a result) are both accepted, so a result
// shown can be passed back as it is.
func ParseResult(b []byte) (*journal.Result, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf(`want {"content": [...], "structuredContent": {...}}: %v`, err)
	}
	var in struct {
		Content           json.RawMessage
		StructuredContent json.RawMessage
		IsError           bool
	}
	for k, v := range fields {
		switch k {
		case "content":
			in.Content = v
		case "structuredContent", "structured_content":
			in.StructuredContent = v
		case "isError", "is_error":
			if err := json.Unmarshal(v, &in.IsError); err != nil {
				return nil, fmt.Errorf("%s: want true or false", k)
			}
		default:
			return nil, fmt.Errorf("unknown member %q (want content, structuredContent, isError)", k)
		}
	}
	if IsNull(in.Content) && IsNull(in.StructuredContent) {
		return nil, errors.New(`the result has neither content nor structuredContent (want {"content": [...], "structuredContent": {...}})`)
	}
	return &journal.Result{Content: in.Content, StructuredContent: in.StructuredContent, IsError: in.IsError}, nil
}

// IsNull reports whether a JSON member is absent or null.
func IsNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
