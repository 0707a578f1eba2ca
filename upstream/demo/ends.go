package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recordEnd writes the ledger line of a call (its execution at line seq)
// that ended before it answered (Config.LedgerEnds): "cancelled" when the
// client cancelled it, "abandoned" when its connection ended first. A call
// that answered writes nothing. The line's key is the call's.
func (d *demo) recordEnd(ctx context.Context, req *mcp.CallToolRequest, seq int) {
	if ctx.Err() == nil {
		return
	}
	key, _ := req.Params.Meta[idempotencyKeyMeta].(string)
	end := "abandoned"
	if d.cancels.told(key) || errors.Is(context.Cause(ctx), context.Canceled) {
		end = "cancelled"
	}
	args, _ := json.Marshal(map[string]any{"tool": req.Params.Name, "row": seq})
	if _, err := d.ledger.append(end, args, key); err != nil {
		fmt.Fprintf(d.stderr, "demo: %v\n", err)
	}
}

// cancelWatch notes, as the server reads them, the idempotency keys of the
// calls a client cancelled: a notifications/cancelled naming a tools/call
// read before on the same connection. go-sdk cancels a call's context
// from a goroutine when the notification arrives, and with the read error
// when the input ends: a client that cancels and hangs up at once can have
// its call's context cancelled by the end of input first. The watch, on the
// reading side, sees the notification before the end. Stdio connections go
// through it when Config.LedgerEnds is set (it keeps every call's key for
// the connection's life); over HTTP the context's cause decides alone.
type cancelWatch struct {
	mu        sync.Mutex
	calls     map[any]string  // tools/call request id → its key
	cancelled map[string]bool // keys
}

// told reports whether the client cancelled the call with key.
func (w *cancelWatch) told(key string) bool {
	if key == "" {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cancelled[key]
}

// watch wraps t so that w sees what the server reads.
func (w *cancelWatch) watch(t mcp.Transport) mcp.Transport {
	return &watchedTransport{Transport: t, w: w}
}

type watchedTransport struct {
	mcp.Transport
	w *cancelWatch
}

func (t *watchedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &watchedConn{Connection: c, w: t.w}, nil
}

type watchedConn struct {
	mcp.Connection
	w *cancelWatch
}

func (c *watchedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil {
		c.w.read(req)
	}
	return msg, err
}

func (w *cancelWatch) read(req *jsonrpc.Request) {
	switch req.Method {
	case "tools/call":
		var p struct {
			Meta map[string]any `json:"_meta"`
		}
		json.Unmarshal(req.Params, &p)
		if key, _ := p.Meta[idempotencyKeyMeta].(string); key != "" && req.ID.IsValid() {
			w.mu.Lock()
			w.calls[req.ID.Raw()] = key
			w.mu.Unlock()
		}
	case "notifications/cancelled":
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) != nil {
			return
		}
		id, err := jsonrpc.MakeID(p.RequestID)
		if err != nil {
			return
		}
		w.mu.Lock()
		if key, ok := w.calls[id.Raw()]; ok {
			w.cancelled[key] = true
		}
		w.mu.Unlock()
	}
}
