// Package ndjson is the connection mcpflow speaks to a stdio MCP server
// over: newline-delimited JSON-RPC on the server's stdout and stdin, an
// mcp.Connection that go-sdk's client sessions run on.
//
// [Transport] frames messages exactly as go-sdk's mcp.IOTransport (v1.8.0)
// does: the same decoder (encoding/json's) finds each message, under the
// same bound (MaxLineLength, with the same error text once it is passed),
// and the same check of what follows it (a newline, \r\n, or the end). A
// batch of requests is answered with one array once every request of it is
// answered. What differs is how a message is decoded. go-sdk decodes each
// inbound message twice (as a batch, then as a message), each time
// through a new decoder that allocates a 32 KiB buffer: 64 KiB of garbage
// a message, most of what the client side of a tools/call allocates. This
// package decodes the common shapes itself, in place (see decodeCommon),
// and hands anything else to go-sdk's jsonrpc.DecodeMessage, so that every
// message is accepted or refused as go-sdk would; FuzzDecodeMessage
// compares the two.
//
// # Caveats
//
//   - A batch that holds notifications is answered once its requests are
//     (go-sdk v1.8.0 waits for answers to its notifications too, and so
//     never answers it), and batches are read under every protocol version
//     (go-sdk's own connection refuses them from 2025-06-18 on, but only
//     when its session tells it the version, which it does not through a
//     wrapping connection such as upstream's wire tap).
//   - A message's params or result share the memory of the message read:
//     a large result is kept whole while any part of it is referenced.
//   - Close closes the writer first (for a process: its stdin, which ends
//     it), then the reader, then waits for the goroutine that reads: a
//     Reader whose Close does not end a Read in progress would hold it up
//     (a process's stdout pipe, a net.Conn and an io.Pipe do end it).
package ndjson

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport connects once, to a Reader and a Writer: a stdio server's
// stdout and stdin. It is go-sdk's mcp.IOTransport with another decoder
// (see the package comment).
type Transport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
	// MaxLineLength bounds the bytes buffered for one inbound message: 0
	// means mcp.DefaultMaxLineLength, a negative value no bound.
	MaxLineLength int
}

var _ mcp.Transport = (*Transport)(nil)

// Connect starts the goroutine that reads, owned by the Conn returned.
func (t *Transport) Connect(context.Context) (mcp.Connection, error) {
	return newConn(t.Reader, t.Writer, t.MaxLineLength), nil
}

// Conn is a connection of a Transport. Read and Write may be called
// concurrently; Read is not called concurrently with itself (the
// mcp.Connection contract).
type Conn struct {
	w io.WriteCloser // a server's stdin: closing it ends the server
	r io.Closer      // its stdout: closing it ends the reader

	// incoming carries what the reader read, a message or the error that
	// ended it. The reader is owned by the connection: it ends when its
	// Read fails, which Close makes happen, and Close waits for it.
	incoming chan frame
	closed   chan struct{}
	readDone chan struct{}

	queue []jsonrpc.Message // the rest of the last batch read (Read only)

	writeMu sync.Mutex

	// batches are the batches of requests read and not fully answered,
	// by request id: their answers go back as one array.
	batchMu sync.Mutex
	batches map[jsonrpc.ID]*inBatch

	closeOnce sync.Once
	closeErr  error
}

var _ mcp.Connection = (*Conn)(nil)

type frame struct {
	raw []byte
	err error
}

// inBatch is a batch of requests read, waiting for its answers.
type inBatch struct {
	unanswered map[jsonrpc.ID]int // index in responses
	responses  []*jsonrpc.Response
}

// ErrFrameTooLarge is an inbound message over the connection's bound. Its
// text is go-sdk's for the same refusal (upstream's frameTooLarge knows
// both).
var ErrFrameTooLarge = errors.New("inbound JSON-RPC frame exceeded the configured maximum line length")

// newConn reads messages from r and writes them to w; maxLine is
// Transport.MaxLineLength.
func newConn(r io.ReadCloser, w io.WriteCloser, maxLine int) *Conn {
	if maxLine == 0 {
		maxLine = mcp.DefaultMaxLineLength
	}
	c := &Conn{w: w, r: r, incoming: make(chan frame), closed: make(chan struct{}), readDone: make(chan struct{})}
	go c.read(r, maxLine)
	return c
}

// read frames the messages on r, as go-sdk's ioConn does, and hands them
// to Read, until r fails or the connection is closed.
func (c *Conn) read(r io.Reader, maxLine int) {
	defer close(c.readDone)
	var limiter *frameLimitReader
	if maxLine > 0 {
		limiter = &frameLimitReader{r: r, limit: maxLine}
		r = limiter
	}
	dec := json.NewDecoder(r)
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == nil {
			// A message is followed by a newline (or \r\n), or by the end.
			var next [1]byte
			if n, err2 := dec.Buffered().Read(next[:]); n > 0 {
				if next[0] != '\n' && next[0] != '\r' {
					err = errors.New("invalid trailing data at the end of stream")
				}
			} else if err2 != nil && err2 != io.EOF {
				err = err2
			}
		}
		select {
		case c.incoming <- frame{raw, err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
		if limiter != nil {
			limiter.count = 0
		}
	}
}

// frameLimitReader bounds what the decoder may buffer for one message.
type frameLimitReader struct {
	r     io.Reader
	limit int
	count int
}

func (r *frameLimitReader) Read(p []byte) (int, error) {
	if r.count >= r.limit {
		return 0, ErrFrameTooLarge
	}
	if len(p) > r.limit-r.count {
		p = p[:r.limit-r.count]
	}
	n, err := r.r.Read(p)
	r.count += n
	return n, err
}

func (c *Conn) SessionID() string { return "" }

// Read returns the next message: the rest of a batch first, then what the
// reader read next. It fails once ctx ended or the connection is closed.
func (c *Conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		msg := c.queue[0]
		c.queue = c.queue[1:]
		return msg, nil
	}
	var raw []byte
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case f := <-c.incoming:
		if f.err != nil {
			return nil, f.err
		}
		raw = f.raw
	case <-c.closed:
		return nil, io.EOF
	}
	if i := skipSpace(raw, 0); i == len(raw) || raw[i] != '[' {
		return decodeMessage(raw)
	}
	msgs, err := decodeBatch(raw)
	if err != nil {
		return nil, err
	}
	c.queue = msgs[1:]
	var batch *inBatch
	for _, msg := range msgs {
		// Notifications are not answered (go-sdk v1.8.0 waits for an
		// answer to them too, and so never answers such a batch).
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if batch == nil {
				batch = &inBatch{unanswered: map[jsonrpc.ID]int{}}
			}
			if _, dup := batch.unanswered[req.ID]; dup {
				return nil, fmt.Errorf("duplicate message ID %q", req.ID)
			}
			batch.unanswered[req.ID] = len(batch.responses)
			batch.responses = append(batch.responses, nil)
		}
	}
	if batch != nil {
		if err := c.addBatch(batch); err != nil {
			return nil, err
		}
	}
	return msgs[0], nil
}

// addBatch records the requests of a batch read, to be answered together.
func (c *Conn) addBatch(b *inBatch) error {
	c.batchMu.Lock()
	defer c.batchMu.Unlock()
	for id := range b.unanswered {
		if _, ok := c.batches[id]; ok {
			return fmt.Errorf("%w: batch contains previously seen request %v", errInvalidRequest, id.Raw())
		}
	}
	if c.batches == nil {
		c.batches = map[jsonrpc.ID]*inBatch{}
	}
	for id := range b.unanswered {
		c.batches[id] = b
	}
	return nil
}

// answered records resp if it answers a request of a batch: it reports
// whether it did, and the batch's answers once resp was the last.
func (c *Conn) answered(resp *jsonrpc.Response) ([]*jsonrpc.Response, bool) {
	c.batchMu.Lock()
	defer c.batchMu.Unlock()
	b, ok := c.batches[resp.ID]
	if !ok {
		return nil, false
	}
	b.responses[b.unanswered[resp.ID]] = resp
	delete(b.unanswered, resp.ID)
	delete(c.batches, resp.ID)
	if len(b.unanswered) > 0 {
		return nil, true
	}
	return b.responses, true
}

// Write writes msg and a newline, or, for the last answer to a batch, the
// batch's answers as one array.
func (c *Conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	var data []byte
	var err error
	if resp, ok := msg.(*jsonrpc.Response); ok {
		if batch, ok := c.answered(resp); ok {
			if batch == nil {
				return nil
			}
			raws := make([]json.RawMessage, len(batch))
			for i, r := range batch {
				if raws[i], err = jsonrpc.EncodeMessage(r); err != nil {
					return fmt.Errorf("encoding batch message: %w", err)
				}
			}
			if data, err = json.Marshal(raws); err != nil {
				return err
			}
		}
	}
	if data == nil {
		if data, err = jsonrpc.EncodeMessage(msg); err != nil {
			return fmt.Errorf("marshaling message: %v", err)
		}
	}
	_, err = c.w.Write(append(data, '\n'))
	return err
}

// Close closes the writer (a server's stdin: closing it ends the server)
// and the reader, and waits for the goroutine that reads to end; later
// calls return the first result, the writer's Close's.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.w.Close()
		close(c.closed)
		c.r.Close() // a process's stdout is closed once it was waited for
		<-c.readDone
	})
	return c.closeErr
}

// errInvalidRequest is go-sdk's jsonrpc2.ErrInvalidRequest, which it does
// not export.
var errInvalidRequest error = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}

// maxDepth is go-sdk's bound on the nesting of a message's JSON.
const maxDepth = 1000

// decodeMessage decodes data, one JSON value, as one JSON-RPC message, as
// go-sdk's jsonrpc.DecodeMessage does: the common shapes here, in place
// (the message's params or result are slices of data), the others by
// jsonrpc.DecodeMessage (FuzzDecodeMessage compares the two).
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	if msg, ok := decodeCommon(data); ok {
		return msg, nil
	}
	return jsonrpc.DecodeMessage(data)
}

// decodeBatch decodes data, one JSON array, as a batch of messages, as
// go-sdk's ioConn does.
func decodeBatch(data []byte) ([]jsonrpc.Message, error) {
	var raws []json.RawMessage
	if depth(data) > maxDepth || json.Unmarshal(data, &raws) != nil {
		// go-sdk then decodes data as one message, which fails.
		_, err := jsonrpc.DecodeMessage(data)
		if err == nil {
			err = errors.New("invalid batch")
		}
		return nil, err
	}
	if len(raws) == 0 {
		return nil, errors.New("empty batch")
	}
	msgs := make([]jsonrpc.Message, len(raws))
	for i, raw := range raws {
		msg, err := decodeMessage(raw)
		if err != nil {
			return nil, err
		}
		msgs[i] = msg
	}
	return msgs, nil
}

// decodeCommon decodes data if it is a message of a common shape: an
// object with plain keys (ASCII, unescaped), each at most once, jsonrpc
// "2.0", an id that is null, a number or a plain string, a method that is
// a plain string, any params and result, and no error member. It reports
// false for anything else, including every message jsonrpc.DecodeMessage
// refuses. data must be one valid JSON value (as the reader's decoder
// returns it); on other input it reports false or decodes what it can.
func decodeCommon(data []byte) (jsonrpc.Message, bool) {
	var version, id, method, params, result []byte
	const (
		hasVersion = 1 << iota
		hasID
		hasMethod
		hasParams
		hasResult
	)
	seen := 0
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return nil, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil, false
	}
	for {
		key, end, ok := plainString(data, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(data, end)
		if i == len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		end, ok = skipValue(data, i)
		if !ok {
			return nil, false
		}
		v, bit := data[i:end], 0
		switch string(key) {
		case "jsonrpc":
			version, bit = v, hasVersion
		case "id":
			id, bit = v, hasID
		case "method":
			method, bit = v, hasMethod
		case "params":
			params, bit = v, hasParams
		case "result":
			result, bit = v, hasResult
		case "error":
			return nil, false
		}
		if seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		i = skipSpace(data, end)
		if i == len(data) {
			return nil, false
		}
		if data[i] == '}' {
			break
		}
		if data[i] != ',' {
			return nil, false
		}
		i = skipSpace(data, i+1)
	}
	if skipSpace(data, i+1) != len(data) || string(version) != `"2.0"` {
		return nil, false
	}
	var idValue any
	switch {
	case id == nil || string(id) == "null":
	case id[0] == '"':
		s, end, ok := plainString(id, 0)
		if !ok || end != len(id) {
			return nil, false
		}
		idValue = string(s)
	case id[0] == '-' || '0' <= id[0] && id[0] <= '9':
		f, err := strconv.ParseFloat(string(id), 64)
		if err != nil {
			return nil, false
		}
		idValue = f
	default:
		return nil, false
	}
	rid, err := jsonrpc.MakeID(idValue)
	if err != nil {
		return nil, false
	}
	if method != nil {
		m, end, ok := plainString(method, 0)
		if !ok || end != len(method) {
			return nil, false
		}
		return &jsonrpc.Request{ID: rid, Method: string(m), Params: raw(params)}, true
	}
	if !rid.IsValid() {
		return nil, false
	}
	return &jsonrpc.Response{ID: rid, Result: raw(result)}, true
}

// raw is v as a json.RawMessage field decodes it: nil when absent.
func raw(v []byte) json.RawMessage {
	if v == nil {
		return nil
	}
	return json.RawMessage(v)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainString returns the contents of the string at data[i] and the index
// after it, if it is a plain string: printable ASCII, no escapes.
func plainString(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch b := data[j]; {
		case b == '"':
			return data[i+1 : j], j + 1, true
		case b == '\\' || b < 0x20 || b >= 0x80:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipValue returns the index after the JSON value at data[i], which is
// not nested deeper than go-sdk accepts (counting the message's object).
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		level := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				end, ok := skipString(data, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				level++
				if 1+level > maxDepth {
					return 0, false
				}
			case '}', ']':
				level--
				if level == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, j > i
		}
		j++
	}
	return j, j > i
}

// skipString returns the index after the string at data[i].
func skipString(data []byte, i int) (int, bool) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// depth is how deeply data's arrays and objects nest, as go-sdk counts it.
func depth(data []byte) int {
	d, deepest := 0, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			end, ok := skipString(data, i)
			if !ok {
				return deepest
			}
			i = end - 1
		case '{', '[':
			d++
			deepest = max(deepest, d)
		case '}', ']':
			if d > 0 {
				d--
			}
		}
	}
	return deepest
}
