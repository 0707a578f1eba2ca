package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/internal/meta"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// idempotencyKeyMeta is the _meta key of a tools/call that carries the
// caller's idempotency key; the ledger records it.
const idempotencyKeyMeta = meta.IdempotencyKey

// hints is a tool's annotations object as declared on the wire: a nil field
// is absent, which is not the same as false.
type hints struct {
	ReadOnly    *bool `json:"readOnlyHint,omitempty"`
	Destructive *bool `json:"destructiveHint,omitempty"`
	Idempotent  *bool `json:"idempotentHint,omitempty"`
}

// declared is the one table of what each tool declares. A nil entry means the
// tool sends no annotations object at all. Unless Config.SDKHints is set,
// tools/list results are rewritten to exactly these shapes (see
// [declaredAnnotations]).
var declared = map[string]*hints{
	"greet":              {ReadOnly: new(true)},
	"upper":              {Idempotent: new(true)},
	"ledger_append":      nil,
	"put_record":         {Destructive: new(true), Idempotent: new(true)},
	"not_idempotent":     {Idempotent: new(false)},
	"contradictory_read": {ReadOnly: new(true), Idempotent: new(false)},
	"ledger_count":       {ReadOnly: new(true), Destructive: new(false)},
	"count_slowly":       {ReadOnly: new(true)},
	"fail":               {ReadOnly: new(true)},
	"media":              {ReadOnly: new(true)},
	"log":                {ReadOnly: new(true)},
	"transfer":           {Destructive: new(true), Idempotent: new(false)},
	"roots":              {ReadOnly: new(true)},
}

// sdk converts the declaration to the SDK's type, which cannot express an
// absent readOnlyHint or idempotentHint.
func (h *hints) sdk() *mcp.ToolAnnotations {
	if h == nil {
		return nil
	}
	deref := func(b *bool) bool { return b != nil && *b }
	return &mcp.ToolAnnotations{
		ReadOnlyHint:    deref(h.ReadOnly),
		IdempotentHint:  deref(h.Idempotent),
		DestructiveHint: h.Destructive,
	}
}

// declaredAnnotations is receiving middleware that makes tools/list results
// marshal with the annotations in [declared] instead of the SDK's
// always-present booleans.
func (d *demo) declaredAnnotations(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
			return &declaredList{ListToolsResult: lr, demo: d}, nil
		}
		return res, err
	}
}

// declaredList is a tools/list result whose JSON carries declared
// annotations. Embedding keeps the SDK's result methods, so the SDK can still
// set _meta and resultType on it after the middleware returns.
type declaredList struct {
	*mcp.ListToolsResult
	demo *demo
}

func (l *declaredList) MarshalJSON() ([]byte, error) {
	env := *l.ListToolsResult
	env.Tools = nil
	data, err := json.Marshal(&env)
	if err != nil {
		return nil, err
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, err
	}
	d := l.demo
	list := []byte{'['}
	for _, t := range l.Tools {
		if d.after == AfterFaultRemoveTool && t.Name == d.cfg.FaultTool {
			continue
		}
		tool, err := d.listedTool(t)
		if err != nil {
			return nil, err
		}
		if len(list) > 1 {
			list = append(list, ',')
		}
		list = append(list, tool...)
	}
	res["tools"] = append(list, ']')
	return json.Marshal(res)
}

// listedTool is t's JSON as tools/list gives it, with its annotations as
// declared. A tool's JSON is made once, by name: every session lists the
// tools at its start, and every server newServer makes (one for all the
// sessions of streamable HTTP, one per session otherwise) has the same
// tools, from a configuration that does not change while it runs.
func (d *demo) listedTool(t *mcp.Tool) ([]byte, error) {
	if b, ok := d.listed.Load(t.Name); ok {
		return b.([]byte), nil
	}
	data, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var tool map[string]json.RawMessage
	if err := json.Unmarshal(data, &tool); err != nil {
		return nil, err
	}
	h, ok := declared[t.Name]
	raw, override := d.annotations[t.Name]
	switch {
	case !ok:
	case override && d.after != AfterFaultStripAnnotations:
		tool["annotations"] = raw
	case h == nil || d.after == AfterFaultStripAnnotations:
		delete(tool, "annotations")
	default:
		if tool["annotations"], err = json.Marshal(h); err != nil {
			return nil, err
		}
	}
	if data, err = json.Marshal(tool); err != nil {
		return nil, err
	}
	d.listed.Store(t.Name, data)
	return data, nil
}

type (
	greetIn struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	greetOut struct {
		Greeting string `json:"greeting"`
	}
	textIn struct {
		Text string `json:"text" jsonschema:"the text to upper-case"`
	}
	textOut struct {
		Text string `json:"text"`
	}
	entryIn struct {
		Entry string `json:"entry" jsonschema:"free text recorded in the ledger arguments"`
	}
	optionalEntryIn struct {
		Entry string `json:"entry,omitempty" jsonschema:"free text recorded in the ledger arguments"`
	}
	rowOut struct {
		Row int `json:"row"`
	}
	record struct {
		Key   string `json:"key" jsonschema:"the record's key"`
		Value string `json:"value" jsonschema:"the value to store under key"`
	}
	rowsOut struct {
		Rows int `json:"rows"`
	}
	countIn struct {
		N       int `json:"n"`
		DelayMS int `json:"delay_ms"`
	}
	countOut struct {
		Count int `json:"count"`
	}
	failIn struct {
		Message string `json:"message,omitempty" jsonschema:"the error text (default \"demo failure\")"`
	}
	logIn struct {
		Message string           `json:"message"`
		Level   mcp.LoggingLevel `json:"level"`
		Stderr  bool             `json:"stderr"`
	}
)

// countSchema is given explicitly because inferred schemas carry no defaults
// or bounds; the SDK applies the defaults before the handler runs.
var countSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"n": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 5, "description": "how far to count"},
		"delay_ms": {"type": "integer", "minimum": 0, "default": 50, "description": "pause before each step, in milliseconds"}
	},
	"additionalProperties": false
}`)

// logSchema lists the MCP log levels.
var logSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"message": {"type": "string", "description": "the data of the log message"},
		"level": {"type": "string", "enum": ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"], "default": "info", "description": "its level"},
		"stderr": {"type": "boolean", "default": false, "description": "also write the message to stderr, as a line"}
	},
	"required": ["message"],
	"additionalProperties": false
}`)

// handler is a tool body. seq is the call's ledger entry, already durable.
type handler[In, Out any] func(ctx context.Context, req *mcp.CallToolRequest, in In, seq int) (*mcp.CallToolResult, Out, error)

// addTool registers a tool whose calls first go through [demo.execute].
func addTool[In, Out any](d *demo, s *mcp.Server, drop dropFunc, name, desc string, schema any, h handler[In, Out]) {
	t := &mcp.Tool{Name: name, Description: desc, InputSchema: schema, Annotations: declared[name].sdk()}
	mcp.AddTool(s, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out Out, err error) {
		seq, err := d.execute(ctx, req, drop)
		if seq > 0 && d.cfg.LedgerEnds {
			defer func() { d.recordEnd(ctx, req, seq) }()
		}
		if err != nil {
			return nil, out, err
		}
		return h(ctx, req, in, seq)
	})
}

// newServer returns an MCP server with every demo tool. drop closes the
// connection that would carry a call's reply; nil means there is none to
// drop (stdio, in-memory), and drop faults exit instead.
func (d *demo) newServer(drop dropFunc) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpflow-demo", Version: "1.0.0"},
		&mcp.ServerOptions{PageSize: d.cfg.PageSize, SupportedProtocolVersions: d.versions})
	if !d.cfg.SDKHints {
		s.AddReceivingMiddleware(d.declaredAnnotations)
	}
	s.AddReceivingMiddleware(listSampleToSamplers)
	addSample(d, s, drop)

	addTool(d, s, drop, "greet", "Greet someone by name.", nil,
		func(_ context.Context, _ *mcp.CallToolRequest, in greetIn, _ int) (*mcp.CallToolResult, greetOut, error) {
			g := "Hello, " + in.Name + "!"
			return textResult(g), greetOut{Greeting: g}, nil
		})
	addTool(d, s, drop, "upper", "Upper-case a text.", nil,
		func(_ context.Context, _ *mcp.CallToolRequest, in textIn, _ int) (*mcp.CallToolResult, textOut, error) {
			u := strings.ToUpper(in.Text)
			return textResult(u), textOut{Text: u}, nil
		})
	appendRow := func(_ context.Context, _ *mcp.CallToolRequest, _ optionalEntryIn, seq int) (*mcp.CallToolResult, rowOut, error) {
		return textResult(fmt.Sprintf("appended row %d", seq)), rowOut{Row: seq}, nil
	}
	addTool(d, s, drop, "ledger_append", "Append a row to the ledger (a plain side effect; declares nothing).", nil,
		func(ctx context.Context, req *mcp.CallToolRequest, in entryIn, seq int) (*mcp.CallToolResult, rowOut, error) {
			return appendRow(ctx, req, optionalEntryIn(in), seq)
		})
	addTool(d, s, drop, "not_idempotent", "Append a row to the ledger; declares idempotentHint false.", nil, appendRow)
	addTool(d, s, drop, "contradictory_read", "Append a row to the ledger; declares readOnlyHint true and idempotentHint false.", nil, appendRow)
	addTool(d, s, drop, "put_record", "Store a value under a key (destructive, idempotent).", nil,
		func(_ context.Context, _ *mcp.CallToolRequest, in record, _ int) (*mcp.CallToolResult, record, error) {
			return nil, in, nil
		})
	addTool(d, s, drop, "ledger_count", "Count the ledger rows written before this call.", nil,
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}, seq int) (*mcp.CallToolResult, rowsOut, error) {
			return nil, rowsOut{Rows: seq - 1}, nil
		})
	addTool(d, s, drop, "count_slowly", "Count to n, reporting progress at every step.", countSchema, countSlowly)
	addTool(d, s, drop, "fail", "Return a tool error (isError) with the given message.", nil,
		func(_ context.Context, _ *mcp.CallToolRequest, in failIn, _ int) (*mcp.CallToolResult, any, error) {
			msg := in.Message
			if msg == "" {
				msg = "demo failure"
			}
			res := textResult(msg)
			res.IsError = true
			return res, nil, nil
		})
	addTool(d, s, drop, "media", "Return one content item of every type: text, image, audio, resource link, embedded text and blob resources.", nil,
		func(context.Context, *mcp.CallToolRequest, struct{}, int) (*mcp.CallToolResult, any, error) {
			return mediaResult(), nil, nil
		})
	addTool(d, s, drop, "log", "Send a log message (notifications/message, logger \"demo\") at the given level, and one at debug; with stderr, also write it to stderr.", logSchema,
		func(ctx context.Context, req *mcp.CallToolRequest, in logIn, _ int) (*mcp.CallToolResult, any, error) {
			level := in.Level
			if level == "" {
				level = "info"
			}
			if in.Stderr {
				// Before the reply, as a server that echoes its arguments does.
				fmt.Fprintf(d.stderr, "demo: log %s: %s\n", level, in.Message)
			}
			// Sent only to a client that asked for this level or a lower one.
			for _, p := range []*mcp.LoggingMessageParams{
				{Level: "debug", Logger: "demo", Data: "debug detail of: " + in.Message},
				{Level: level, Logger: "demo", Data: in.Message},
			} {
				if err := req.Session.Log(ctx, p); err != nil {
					return nil, nil, err
				}
			}
			return textResult("logged at " + string(level)), nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "transfer", Description: "Transfer an amount to someone, once confirmed: asks for a confirmation (elicitation) before appending its row to the ledger.",
		InputSchema: transferSchema, Annotations: declared["transfer"].sdk()}, d.transfer(drop))
	s.AddTool(&mcp.Tool{Name: "roots", Description: "List the client's roots (asked for with the call's input requests, or during the call).",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`), Annotations: declared["roots"].sdk()}, d.roots)
	d.addReads(s)
	return s
}

// mediaResult is the media tool's result: one content item of each type,
// with sizes a client can check (5,300 bytes of PNG, 12,000 of WAV, an
// 8-line text resource, a 2,048-byte blob).
func mediaResult() *mcp.CallToolResult {
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 5300-8)...)
	wav := append([]byte("RIFF"), make([]byte, 12000-4)...)
	size := int64(1532)
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "every content type"},
		&mcp.ImageContent{Data: png, MIMEType: "image/png"},
		&mcp.AudioContent{Data: wav, MIMEType: "audio/wav"},
		&mcp.ResourceLink{URI: "file:///demo/report.md", Name: "report.md", Title: "Quarterly report", MIMEType: "text/markdown", Size: &size},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: notesURI, MIMEType: "text/plain", Text: notesText()}},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///demo/logo.bin", MIMEType: "application/octet-stream", Blob: make([]byte, 2048)}},
	}}
}

func countSlowly(ctx context.Context, req *mcp.CallToolRequest, in countIn, _ int) (*mcp.CallToolResult, countOut, error) {
	token := req.Params.GetProgressToken()
	for i := 1; i <= in.N; i++ {
		if err := sleep(ctx, time.Duration(in.DelayMS)*time.Millisecond); err != nil {
			return nil, countOut{}, err
		}
		if token == nil {
			continue
		}
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(i),
			Total:         float64(in.N),
			Message:       fmt.Sprintf("counted %d of %d", i, in.N),
		})
		if err != nil {
			return nil, countOut{}, err
		}
	}
	return textResult(fmt.Sprintf("counted to %d", in.N)), countOut{Count: in.N}, nil
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// sleep waits for d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
