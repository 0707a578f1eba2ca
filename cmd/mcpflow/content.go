package main

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
)

// previewLines is how many lines of an embedded resource's text are shown.
const previewLines = 5

// contentItem is one element of a CallToolResult's content list, as
// journaled: the union of the MCP content types' fields.
type contentItem struct {
	Type     string    `json:"type"`
	Text     string    `json:"text"`
	Data     string    `json:"data"` // base64: image, audio
	MIMEType string    `json:"mimeType"`
	URI      string    `json:"uri"`
	Name     string    `json:"name"`
	Title    string    `json:"title"`
	Size     *int64    `json:"size"`
	Resource *resource `json:"resource"`
}

// resource is an embedded resource's contents: text or a base64 blob.
type resource struct {
	URI      string  `json:"uri"`
	MIMEType string  `json:"mimeType"`
	Text     *string `json:"text"`
	Blob     *string `json:"blob"`
}

// contentLines renders a result's content list for people, one string per
// line: text as it is; image and audio as [MIME SIZE]; a resource link as
// [link URI "TITLE" MIME SIZE]; an embedded resource as [resource URI MIME]
// followed by the first lines of its text (indented) or [blob MIME SIZE];
// any other type as [TYPE content]. Nothing is dropped. A content list the
// journal did not keep (over its size limit) says so. This is the one
// rendering of content: call, journal show and whatever else shows a
// result as text use it; JSON output keeps the journaled result as is.
func contentLines(content json.RawMessage) []string {
	if api.IsNull(content) {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(content, &items); err != nil {
		var capped struct {
			Truncated bool `json:"truncated"`
			Bytes     int  `json:"bytes"`
		}
		if json.Unmarshal(content, &capped) == nil && capped.Truncated {
			return []string{fmt.Sprintf("[content of %s not kept: over the journal's size limit]", byteSize(int64(capped.Bytes)))}
		}
		return []string{string(content)}
	}
	var out []string
	for _, raw := range items {
		var c contentItem
		if err := json.Unmarshal(raw, &c); err != nil {
			out = append(out, string(raw))
			continue
		}
		out = append(out, c.lines()...)
	}
	return out
}

func (c contentItem) lines() []string {
	switch c.Type {
	case "text":
		return strings.Split(c.Text, "\n")
	case "image", "audio":
		return []string{"[" + spaced(cmp.Or(c.MIMEType, c.Type), byteSize(decodedLen(c.Data))) + "]"}
	case "resource_link":
		title := cmp.Or(c.Title, c.Name)
		if title != "" {
			title = strconv.Quote(title)
		}
		size := ""
		if c.Size != nil {
			size = byteSize(*c.Size)
		}
		return []string{"[" + spaced("link", c.URI, title, c.MIMEType, size) + "]"}
	case "resource":
		if c.Resource == nil {
			return []string{"[resource]"}
		}
		r := c.Resource
		out := []string{"[" + spaced("resource", r.URI, r.MIMEType) + "]"}
		switch {
		case r.Blob != nil:
			out = append(out, "  ["+spaced("blob", cmp.Or(r.MIMEType, "application/octet-stream"), byteSize(decodedLen(*r.Blob)))+"]")
		case r.Text != nil && *r.Text != "":
			lines := strings.Split(strings.TrimSuffix(*r.Text, "\n"), "\n")
			for _, l := range lines[:min(len(lines), previewLines)] {
				out = append(out, "  "+l)
			}
			switch n := len(lines) - previewLines; {
			case n == 1:
				out = append(out, "  … 1 more line")
			case n > 1:
				out = append(out, fmt.Sprintf("  … %d more lines", n))
			}
		}
		return out
	}
	return []string{"[" + cmp.Or(c.Type, "untyped") + " content]"}
}

// readLines renders a read's or a prompt's journaled result for people,
// one string a line: each of a resource's contents as contentLines shows
// an embedded resource ([resource URI MIME], then the first lines of its
// text, or [blob MIME SIZE]); a prompt's description, then each message as
// ROLE: and its content, indented. A result the journal did not keep (over
// its size limit), or that does not read, is shown as it is.
func readLines(m journal.Method, structured json.RawMessage) []string {
	if api.IsNull(structured) {
		return nil
	}
	if m == journal.MethodRead {
		var res struct {
			Contents []json.RawMessage `json:"contents"`
		}
		if json.Unmarshal(structured, &res) != nil || res.Contents == nil {
			return contentLines(structured)
		}
		var out []string
		for _, c := range res.Contents {
			out = append(out, contentLines(json.RawMessage(`[{"type":"resource","resource":`+string(c)+`}]`))...)
		}
		return out
	}
	var res struct {
		Description string `json:"description"`
		Messages    []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(structured, &res) != nil || res.Messages == nil {
		return contentLines(structured)
	}
	var out []string
	if res.Description != "" {
		out = append(out, "description: "+res.Description)
	}
	for _, msg := range res.Messages {
		out = append(out, cmp.Or(msg.Role, "(no role)")+":")
		for _, l := range contentLines(json.RawMessage("[" + string(msg.Content) + "]")) {
			out = append(out, "  "+l)
		}
	}
	return out
}

// printResult prints a result as call shows it: its content, and its
// structured content when no text content says the same (the MCP
// specification asks tools to mirror structured content in text).
func printResult(w io.Writer, r *journal.Result) {
	for _, l := range contentLines(r.Content) {
		fmt.Fprintln(w, l)
	}
	if !hasText(r.Content) && !api.IsNull(r.StructuredContent) {
		fmt.Fprintln(w, jsonText(r.StructuredContent))
	}
}

// hasText reports whether a content list holds a text item.
func hasText(content json.RawMessage) bool { return len(api.Texts(content)) > 0 }

// decodedLen is the size of the bytes base64 data encodes.
func decodedLen(data string) int64 {
	if b, err := base64.StdEncoding.DecodeString(data); err == nil {
		return int64(len(b))
	}
	// Not valid standard base64: estimate from the length.
	s := strings.TrimRight(strings.Join(strings.Fields(data), ""), "=")
	return int64(len(s)) * 3 / 4
}

// byteSize is n bytes in decimal units: 512 B, 5.3 KB, 12 KB, 1.5 MB.
func byteSize(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	f, units := float64(n), []string{"KB", "MB", "GB", "TB"}
	for i, u := range units {
		f /= 1000
		if f < 999.5 || i == len(units)-1 {
			if f < 9.95 {
				return fmt.Sprintf("%.1f %s", f, u)
			}
			return fmt.Sprintf("%.0f %s", f, u)
		}
	}
	return "" // unreachable
}

// spaced joins the non-empty parts with spaces.
func spaced(parts ...string) string {
	out := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}
