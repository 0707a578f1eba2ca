package ndjson

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sameMessage reports how a and b differ, or "" if they do not.
func sameMessage(a, b jsonrpc.Message) string {
	switch a := a.(type) {
	case *jsonrpc.Request:
		b, ok := b.(*jsonrpc.Request)
		switch {
		case !ok:
			return fmt.Sprintf("request, want %T", b)
		case a.ID != b.ID || a.Method != b.Method || !bytes.Equal(a.Params, b.Params) || (a.Params == nil) != (b.Params == nil):
			return fmt.Sprintf("request %v %q %q, want %v %q %q", a.ID, a.Method, a.Params, b.ID, b.Method, b.Params)
		}
	case *jsonrpc.Response:
		b, ok := b.(*jsonrpc.Response)
		switch {
		case !ok:
			return fmt.Sprintf("response, want %T", b)
		case a.ID != b.ID || !bytes.Equal(a.Result, b.Result) || (a.Result == nil) != (b.Result == nil) || fmt.Sprint(a.Error) != fmt.Sprint(b.Error):
			return fmt.Sprintf("response %v %q %v, want %v %q %v", a.ID, a.Result, a.Error, b.ID, b.Result, b.Error)
		}
	default:
		return fmt.Sprintf("%T", a)
	}
	return ""
}

// The shapes go-sdk and most servers write are decoded in place, and as
// go-sdk decodes them.
func TestDecodeCommonShapes(t *testing.T) {
	id7, _ := jsonrpc.MakeID(float64(7))
	idS, _ := jsonrpc.MakeID("a-1")
	msgs := []jsonrpc.Message{
		&jsonrpc.Response{ID: id7, Result: json.RawMessage(`{"content":[{"type":"text","text":"HI"}],"structuredContent":{"text":"HI"}}`)},
		&jsonrpc.Response{ID: idS, Result: json.RawMessage(`{}`)},
		&jsonrpc.Request{ID: id7, Method: "roots/list", Params: json.RawMessage(`{}`)},
		&jsonrpc.Request{Method: "notifications/progress", Params: json.RawMessage(`{"progressToken":"t","progress":1}`)},
		&jsonrpc.Request{Method: "notifications/tools/list_changed"},
	}
	for _, want := range msgs {
		data, err := jsonrpc.EncodeMessage(want)
		if err != nil {
			t.Fatal(err)
		}
		for _, data := range [][]byte{data, []byte(" \n" + strings.ReplaceAll(string(data), ",", " ,\t") + "\r\n")} {
			got, ok := decodeCommon(data)
			if !ok {
				t.Errorf("%s: not decoded in place", data)
				continue
			}
			want, err := jsonrpc.DecodeMessage(data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := sameMessage(got, want); diff != "" {
				t.Errorf("%s: %s", data, diff)
			}
		}
	}
}

// Anything decodeCommon does not take is go-sdk's to decode or refuse.
func TestDecodeUncommonShapes(t *testing.T) {
	for _, data := range []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`,
		`{"jsonrpc":"2.0","\u0069d":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":"\u00e9","result":{}}`,
		`{"jsonrpc":"2.0","id":true,"result":{}}`,
		`{"jsonrpc":"2.0","id":1e999,"result":{}}`,
		`{"jsonrpc":"1.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","method":null}`,
		`{"jsonrpc":"2.0","method":"x","params":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
		`{}`, `[]`, `null`, `"x"`,
	} {
		if msg, ok := decodeCommon([]byte(data)); ok {
			t.Errorf("%s: decoded in place as %+v", data, msg)
		}
		got, err := decodeMessage([]byte(data))
		want, wantErr := jsonrpc.DecodeMessage([]byte(data))
		if (err != nil) != (wantErr != nil) || err == nil && sameMessage(got, want) != "" {
			t.Errorf("%s: %v %v, want %v %v", data, got, err, want, wantErr)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"HI"}]}}`,
		`{"jsonrpc":"2.0","id":"x","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"\"quoted\" \\ ]}"}}`,
		`{"jsonrpc":"2.0","id":-1.5e3,"result":null,"params":[1,{"a":[]}]}`,
		` { "jsonrpc" : "2.0" , "id" : null , "method" : "" } `,
		`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, ok := decodeCommon(data) // never panics, whatever data is
		if !json.Valid(data) {
			return // the reader's decoder hands over valid JSON only
		}
		want, wantErr := jsonrpc.DecodeMessage(data)
		if ok {
			if wantErr != nil {
				t.Fatalf("%s: decoded in place, go-sdk refuses it: %v", data, wantErr)
			}
			if diff := sameMessage(msg, want); diff != "" {
				t.Fatalf("%s: %s", data, diff)
			}
		}
		if i := skipSpace(data, 0); i < len(data) && data[i] == '[' {
			decodeBatch(data) // never panics
		}
	})
}

// connPair is a Conn and the other end of its pipes: what it
// writes, and a writer to what it reads.
func connPair(t *testing.T, maxLine int) (*Conn, *bufio.Reader, io.WriteCloser) {
	t.Helper()
	inR, inW := io.Pipe()   // what the connection reads
	outR, outW := io.Pipe() // what it writes
	c := newConn(inR, outW, maxLine)
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		c.Close()
	})
	return c, bufio.NewReader(outR), inW
}

func readMsg(t *testing.T, c *Conn) (jsonrpc.Message, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Read(ctx)
}

func TestLineConnFraming(t *testing.T) {
	c, _, in := connPair(t, 64)
	go io.WriteString(in, `{"jsonrpc":"2.0","method":"a"}`+"\r\n"+
		"{\"jsonrpc\":\"2.0\",\n\"method\":\"b\"}\n"+ // a value over two lines, as go-sdk reads it
		`{"jsonrpc":"2.0","method":"`+strings.Repeat("c", 64)+`"}`+"\n")
	for _, want := range []string{"a", "b"} {
		msg, err := readMsg(t, c)
		if err != nil {
			t.Fatal(err)
		}
		if req, ok := msg.(*jsonrpc.Request); !ok || req.Method != want {
			t.Fatalf("read %+v, want method %s", msg, want)
		}
	}
	if _, err := readMsg(t, c); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("a message over the bound: %v, want ErrFrameTooLarge", err)
	}
}

func TestLineConnTrailingData(t *testing.T) {
	c, _, in := connPair(t, 0)
	go io.WriteString(in, `{"jsonrpc":"2.0","method":"a"} {"jsonrpc":"2.0","method":"b"}`+"\n")
	if _, err := readMsg(t, c); err == nil || !strings.Contains(err.Error(), "trailing data") {
		t.Fatalf("two messages on a line: %v, want invalid trailing data", err)
	}
}

// A batch of requests is answered with one array, once every request of
// it is answered; a notification in it is read in its turn.
func TestLineConnBatch(t *testing.T) {
	c, out, in := connPair(t, 0)
	go io.WriteString(in, `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"2","method":"b"}]`+"\n")
	var reqs []*jsonrpc.Request
	for range 3 {
		msg, err := readMsg(t, c)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, msg.(*jsonrpc.Request))
	}
	if reqs[0].Method != "a" || reqs[1].Method != "n" || reqs[2].Method != "b" {
		t.Fatalf("read %+v %+v %+v", reqs[0], reqs[1], reqs[2])
	}
	ctx := context.Background()
	if err := c.Write(ctx, &jsonrpc.Response{ID: reqs[2].ID, Result: json.RawMessage(`"B"`)}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Write(ctx, &jsonrpc.Response{ID: reqs[0].ID, Result: json.RawMessage(`"A"`)}) }()
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"jsonrpc":"2.0","id":1,"result":"A"},{"jsonrpc":"2.0","id":"2","result":"B"}]` + "\n"; line != want {
		t.Errorf("wrote %q, want %q", line, want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLineConnBadBatches(t *testing.T) {
	for _, data := range []string{`[]`, `[1]`, `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"}]`} {
		c, _, in := connPair(t, 0)
		go io.WriteString(in, data+"\n")
		if msg, err := readMsg(t, c); err == nil {
			t.Errorf("%s: read %+v, want an error", data, msg)
		}
	}
}

// Close ends the reader, and a Read after it fails; Close again returns
// the first result.
func TestLineConnClose(t *testing.T) {
	c, _, _ := connPair(t, 0)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := readMsg(t, c); err != io.EOF {
		t.Errorf("Read after Close: %v, want EOF", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Write(context.Background(), &jsonrpc.Request{Method: "x"}); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// BenchmarkRead reads a tools/call response, as the demo's upper tool
// answers, through this package's Conn and through go-sdk's own. Run it
// with:
//
//	go test ./internal/ndjson -run '^$' -bench Read
func BenchmarkRead(b *testing.B) {
	line := `{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"HELLO"}],"structuredContent":{"text":"HELLO"}}}` + "\n"
	for _, bc := range []struct {
		name string
		t    func(r io.ReadCloser) mcp.Transport
	}{
		{"ndjson", func(r io.ReadCloser) mcp.Transport { return &Transport{Reader: r, Writer: nopWriter{}} }},
		{"go-sdk", func(r io.ReadCloser) mcp.Transport { return &mcp.IOTransport{Reader: r, Writer: nopWriter{}} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, w := io.Pipe()
			go func() {
				data := []byte(strings.Repeat(line, 64))
				for {
					if _, err := w.Write(data); err != nil {
						return
					}
				}
			}()
			conn, err := bc.t(r).Connect(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			defer r.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := conn.Read(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) Close() error                { return nil }
