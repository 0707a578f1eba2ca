package upstream

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireTransport wraps a transport to see the messages as they cross the
// wire: it keeps the raw tools/list results (so annotations are known as
// declared, absent fields absent) and counts tools/call requests written,
// and resources/read and prompts/get requests.
type wireTransport struct {
	inner mcp.Transport
	tap   *wireTap

	mu   sync.Mutex
	conn *wireConn // the last connection made
}

type wireTap struct {
	// tooLarge: the connection broke on an inbound message over the
	// transport's limit.
	tooLarge atomic.Bool

	calls atomic.Int64
	reads atomic.Int64 // resources/read and prompts/get

	// secrets are scrubbed from log messages (notifications/message) as
	// they are read: a message the server sent before its answer to a call
	// is scrubbed with the secrets held while the call was made, however
	// late go-sdk hands it to the log. The log is the messages' one use.
	secrets *secretSet

	mu        sync.Mutex
	listIDs   map[any]bool
	annotated map[string]rawTool
}

type rawTool struct {
	Name         string          `json:"name"`
	Annotations  json.RawMessage `json:"annotations"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

func newWireTap() *wireTap {
	return &wireTap{listIDs: map[any]bool{}, annotated: map[string]rawTool{}}
}

func (t *wireTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	wc := &wireConn{Connection: c, tap: t.tap}
	t.mu.Lock()
	t.conn = wc
	t.mu.Unlock()
	return wc, nil
}

// closeConn closes the last connection made, if it is not closed yet.
func (t *wireTransport) closeConn() {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

type wireConn struct {
	mcp.Connection
	tap *wireTap

	closeOnce sync.Once
	closeErr  error
}

// Close closes the inner connection once; later calls return the first
// result.
func (c *wireConn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.Connection.Close() })
	return c.closeErr
}

func (c *wireConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		switch req.Method {
		case "tools/call":
			c.tap.calls.Add(1)
		case "resources/read", "prompts/get":
			c.tap.reads.Add(1)
		case "tools/list":
			c.tap.mu.Lock()
			c.tap.listIDs[req.ID.Raw()] = true
			c.tap.mu.Unlock()
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *wireConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if frameTooLarge(err) {
		c.tap.tooLarge.Store(true)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "notifications/message" && c.tap.secrets != nil {
		req.Params = c.tap.secrets.scrubJSON(req.Params)
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil && resp.ID.IsValid() {
		c.tap.mu.Lock()
		isList := c.tap.listIDs[resp.ID.Raw()]
		delete(c.tap.listIDs, resp.ID.Raw())
		c.tap.mu.Unlock()
		if isList && resp.Error == nil {
			c.tap.recordList(resp.Result)
		}
	}
	return msg, err
}

func (t *wireTap) recordList(result json.RawMessage) {
	var page struct {
		Tools []rawTool `json:"tools"`
	}
	if json.Unmarshal(result, &page) != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, rt := range page.Tools {
		if string(rt.Annotations) == "null" {
			rt.Annotations = nil
		}
		t.annotated[rt.Name] = rt
	}
}

// forgetTools drops the tools recorded from earlier listings.
func (t *wireTap) forgetTools() {
	t.mu.Lock()
	t.annotated = map[string]rawTool{}
	t.mu.Unlock()
}

func (t *wireTap) raw(name string) (rawTool, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rt, ok := t.annotated[name]
	return rt, ok
}
