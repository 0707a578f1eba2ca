package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"
)

// DefaultLedger is the ledger path used when Config.Ledger is empty,
// relative to the working directory.
const DefaultLedger = ".mcpflow/demo/ledger.jsonl"

// Config configures the demo server. Zero value = stdio, no faults, ledger
// at DefaultLedger.
type Config struct {
	HTTPAddr   string        // --http 127.0.0.1:PORT : serve streamable HTTP at path /mcp
	SSEAddr    string        // --sse 127.0.0.1:PORT  : serve the older SSE transport at path /sse
	Ledger     string        // --ledger PATH (env MCPFLOW_DEMO_LEDGER); default DefaultLedger relative to cwd
	Fault      string        // --fault MODE (env MCPFLOW_DEMO_FAULT); see the package documentation
	FaultTool  string        // --fault-tool NAME (env MCPFLOW_DEMO_FAULT_TOOL); "" = every tool; a resource's URI or the prompt's name aims at reads
	AfterFault string        // --after-fault MODE (env MCPFLOW_DEMO_AFTER_FAULT): how a new process behaves once a -once fault fired
	Delay      time.Duration // --delay D (env MCPFLOW_DEMO_DELAY): sleep before executing each call
	PageSize   int           // --page-size N (env MCPFLOW_DEMO_PAGE_SIZE): tools/list page size, 0 = SDK default
	SDKHints   bool          // --sdk-hints: let go-sdk emit its default always-present readOnlyHint/idempotentHint booleans instead of sparse annotations
	// LedgerEnds (--ledger-ends, env MCPFLOW_DEMO_LEDGER_ENDS=1) adds a
	// ledger line for every call that ends before it answers: "cancelled"
	// when the client cancelled it (notifications/cancelled), "abandoned"
	// when its connection ended first. See the package documentation.
	LedgerEnds bool
	// NoLedger (--no-ledger, env MCPFLOW_DEMO_NO_LEDGER=1) writes no ledger
	// line: every tool runs without its append and its fsync, and the tools
	// that answer with their row answer row 0. For benchmarks, where the
	// ledger's fsync and its re-read of the whole file on every append would
	// measure the demo server instead of its client.
	NoLedger bool
	// Protocol is the newest MCP protocol version the server speaks
	// (--protocol, env MCPFLOW_DEMO_PROTOCOL); "" = go-sdk's newest. With
	// "2025-11-25" or older, clients initialize, and the sample tool asks
	// for sampling with a request of its own during the call.
	Protocol string
	// Annotations replace what tools declare on the wire, exactly: TOOL=JSON
	// (--annotations, repeatable; env MCPFLOW_DEMO_ANNOTATIONS, one a line).
	// The JSON may be anything, a malformed annotations object included.
	Annotations []string

	envErr error // an environment default AddFlags could not parse; Serve returns it
}

// AddFlags registers the flags of c on fs, with defaults taken from the
// MCPFLOW_DEMO_* environment variables. An unparsable MCPFLOW_DEMO_DELAY or
// MCPFLOW_DEMO_PAGE_SIZE is reported by Serve unless the flag overrides it.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	ledger := os.Getenv("MCPFLOW_DEMO_LEDGER")
	if ledger == "" {
		ledger = DefaultLedger
	}
	var delay time.Duration
	if v := os.Getenv("MCPFLOW_DEMO_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			c.envErr = fmt.Errorf("demo: MCPFLOW_DEMO_DELAY: %w", err)
		}
		delay = d
	}
	var pageSize int
	if v := os.Getenv("MCPFLOW_DEMO_PAGE_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			c.envErr = fmt.Errorf("demo: MCPFLOW_DEMO_PAGE_SIZE: %w", err)
		}
		pageSize = n
	}
	fs.StringVar(&c.HTTPAddr, "http", "", "serve streamable HTTP at http://`ADDR`/mcp (port 0 picks a free port)")
	fs.StringVar(&c.SSEAddr, "sse", "", "serve the older SSE transport at http://`ADDR`/sse")
	fs.StringVar(&c.Ledger, "ledger", ledger, "execution ledger `file` (env MCPFLOW_DEMO_LEDGER)")
	fs.StringVar(&c.Fault, "fault", os.Getenv("MCPFLOW_DEMO_FAULT"), "inject a fault `mode`: exit-after-commit[-once], exit-before-commit, drop-after-commit[-once], hang-after-commit, rpc-error-after-commit, reject-before-commit (env MCPFLOW_DEMO_FAULT)")
	fs.StringVar(&c.AfterFault, "after-fault", os.Getenv("MCPFLOW_DEMO_AFTER_FAULT"), "once a -once fault has fired, a new server process `behaves`: strip-annotations, remove-tool or refuse (env MCPFLOW_DEMO_AFTER_FAULT)")
	fs.StringVar(&c.FaultTool, "fault-tool", os.Getenv("MCPFLOW_DEMO_FAULT_TOOL"), "apply the fault only to calls of `tool`, or to reads of a resource URI or gets of a prompt (default every tool; env MCPFLOW_DEMO_FAULT_TOOL)")
	fs.DurationVar(&c.Delay, "delay", delay, "sleep before executing each call (env MCPFLOW_DEMO_DELAY)")
	fs.IntVar(&c.PageSize, "page-size", pageSize, "tools/list page size, 0 = SDK default (env MCPFLOW_DEMO_PAGE_SIZE)")
	var ann []string
	if v := os.Getenv("MCPFLOW_DEMO_ANNOTATIONS"); v != "" {
		ann = strings.Split(strings.TrimSpace(v), "\n")
	}
	fs.StringArrayVar(&c.Annotations, "annotations", ann, "send `TOOL=JSON` as the tool's annotations, exactly (repeatable; env MCPFLOW_DEMO_ANNOTATIONS, one a line)")
	fs.StringVar(&c.Protocol, "protocol", os.Getenv("MCPFLOW_DEMO_PROTOCOL"), "speak MCP protocol `version`s up to this one, such as 2025-11-25 (default go-sdk's newest; env MCPFLOW_DEMO_PROTOCOL)")
	fs.BoolVar(&c.SDKHints, "sdk-hints", false, "send go-sdk's always-present readOnlyHint/idempotentHint instead of the declared sparse annotations")
	fs.BoolVar(&c.NoLedger, "no-ledger", os.Getenv("MCPFLOW_DEMO_NO_LEDGER") == "1", "write no ledger line: tools run without counting their executions, for benchmarks (env MCPFLOW_DEMO_NO_LEDGER=1)")
	fs.BoolVar(&c.LedgerEnds, "ledger-ends", os.Getenv("MCPFLOW_DEMO_LEDGER_ENDS") == "1", "also write a ledger line for each call that ends unanswered: cancelled by the client, or abandoned with its connection (env MCPFLOW_DEMO_LEDGER_ENDS=1)")

	// A flag given on the command line replaces a bad environment default.
	for _, name := range []string{"delay", "page-size"} {
		f := fs.Lookup(name)
		set := f.Value
		f.Value = flagValue{set, func() { c.envErr = nil }}
	}
}

// flagValue wraps a pflag.Value to run onSet after a successful Set.
type flagValue struct {
	pflag.Value
	onSet func()
}

func (v flagValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	v.onSet()
	return nil
}

// Serve runs the demo server until ctx is cancelled or, in stdio mode, until
// stdin reaches EOF. Both are a clean end and return nil.
//
// With neither HTTPAddr nor SSEAddr set, Serve speaks MCP over stdin and
// stdout and writes nothing else to stdout. Otherwise it listens on each
// address given and, once listening, writes one line per address to stderr:
// "listening on http://HOST:PORT/mcp" (or "/sse").
//
// A fault that exits ends the process with status 17, whatever the mode.
func Serve(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer, stderr io.Writer) error {
	d, err := newDemo(cfg)
	if err != nil {
		return err
	}
	d.done = ctx.Done()
	if stderr != nil {
		d.stderr = stderr
	}
	if cfg.HTTPAddr == "" && cfg.SSEAddr == "" {
		return d.serveStdio(ctx, stdin, stdout)
	}
	return d.serveHTTP(ctx, stderr)
}

func (d *demo) serveStdio(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var t mcp.Transport = &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
	if d.cfg.LedgerEnds {
		t = d.cancels.watch(t)
	}
	err := d.newServer(nil).Run(ctx, t)
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// shutdownGrace bounds how long Serve waits for HTTP requests in flight.
const shutdownGrace = time.Second

func (d *demo) serveHTTP(ctx context.Context, stderr io.Writer) error {
	type endpoint struct {
		addr, path string
		handler    http.Handler
	}
	var eps []endpoint
	if d.cfg.HTTPAddr != "" {
		s := d.newServer(d.conns.drop)
		var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		if d.fault.kind == faultDrop {
			h = d.conns.wrap(h)
		}
		eps = append(eps, endpoint{d.cfg.HTTPAddr, "/mcp", h})
	}
	if d.cfg.SSEAddr != "" {
		// The SSE handler asks for a server per GET stream, which is also
		// the connection that carries that session's replies.
		h := mcp.NewSSEHandler(func(r *http.Request) *mcp.Server { return d.newServer(dropConn(connOf(r))) }, nil)
		eps = append(eps, endpoint{d.cfg.SSEAddr, "/sse", h})
	}

	var (
		servers []*http.Server
		errc    = make(chan error, len(eps))
	)
	for _, ep := range eps {
		ln, err := net.Listen("tcp", ep.addr)
		if err != nil {
			for _, s := range servers {
				s.Close()
			}
			for range servers {
				<-errc
			}
			return fmt.Errorf("demo: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle(ep.path, ep.handler)
		s := &http.Server{
			Handler:     mux,
			BaseContext: func(net.Listener) context.Context { return ctx },
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, c)
			},
			ErrorLog: log.New(stderr, "demo-server: ", 0),
		}
		servers = append(servers, s)
		fmt.Fprintf(stderr, "listening on http://%s%s\n", ln.Addr(), ep.path)
		go func() { errc <- s.Serve(ln) }()
	}

	// Run until cancelled or until a server fails, then stop them all and
	// wait for every Serve goroutine.
	running := len(servers)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		running--
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	for _, s := range servers {
		if s.Shutdown(sctx) != nil {
			s.Close()
		}
	}
	for ; running > 0; running-- {
		<-errc
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}
