package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/internal/atomicfile"
)

// exit ends the process when a fault fires. Tests replace it; when it
// returns, the call fails with errExitIntercepted.
var exit = os.Exit

// exitCode is the status the process exits with when an exit fault fires.
const exitCode = 17

type faultKind int

const (
	faultNone     faultKind = iota
	faultExit               // end the process before replying
	faultDrop               // close the HTTP connection that would carry the reply
	faultHang               // never reply; wait until cancelled
	faultRPCError           // answer with a JSON-RPC error response (not an isError result)
)

// fault is a parsed Config.Fault mode.
type fault struct {
	kind   faultKind
	before bool // fire before the ledger append instead of after it
	once   bool // fire only if the marker file does not exist yet
	// rpc is the JSON-RPC error a faultRPCError answers with.
	rpc *jsonrpc.Error
}

var faultModes = map[string]fault{
	"":                       {},
	"exit-after-commit":      {kind: faultExit},
	"exit-after-commit-once": {kind: faultExit, once: true},
	"exit-before-commit":     {kind: faultExit, before: true},
	"drop-after-commit":      {kind: faultDrop},
	"drop-after-commit-once": {kind: faultDrop, once: true},
	"hang-after-commit":      {kind: faultHang},
	// The tool may have run: -32603 is not one of the codes that prove a
	// request was not processed.
	"rpc-error-after-commit": {kind: faultRPCError, rpc: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}},
	// The tool provably did not run: invalid params, and no ledger line.
	"reject-before-commit": {kind: faultRPCError, before: true, rpc: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params"}},
}

func parseFault(mode string) (fault, error) {
	f, ok := faultModes[mode]
	if !ok {
		valid := slices.Sorted(maps.Keys(faultModes))[1:] // drop ""
		return fault{}, fmt.Errorf("%w %q (valid: %s)", ErrUnknownFault, mode, strings.Join(valid, ", "))
	}
	return f, nil
}

// demo is the state shared by every MCP server that Serve creates.
type demo struct {
	cfg    Config
	fault  fault
	ledger ledger
	marker string // <ledger>.fault-fired, for the -once modes
	after  string // Config.AfterFault, when the marker existed at start
	// annotations replace what tools declare (Config.Annotations).
	annotations map[string]json.RawMessage
	done        <-chan struct{} // closed when Serve shuts down; nil = never
	stderr      io.Writer       // the log tool's stderr lines; io.Discard unless Serve says
	conns       connRegistry
	cancels     cancelWatch // the calls clients cancelled (Config.LedgerEnds)
	versions    []string    // the protocol versions served (Config.Protocol); nil = go-sdk's
	listed      sync.Map    // a tool's name → its JSON in tools/list (listedTool)
}

func newDemo(cfg Config) (*demo, error) {
	if cfg.envErr != nil {
		return nil, cfg.envErr
	}
	if cfg.Ledger == "" {
		cfg.Ledger = DefaultLedger
	}
	if cfg.PageSize < 0 {
		return nil, fmt.Errorf("demo: page size %d is negative", cfg.PageSize)
	}
	versions, err := protocolVersions(cfg.Protocol)
	if err != nil {
		return nil, err
	}
	f, err := parseFault(cfg.Fault)
	if err != nil {
		return nil, err
	}
	if _, ok := declared[cfg.FaultTool]; cfg.FaultTool != "" && !ok && !slices.Contains(readTargets, cfg.FaultTool) {
		return nil, fmt.Errorf("%w %q for --fault-tool", ErrUnknownTool, cfg.FaultTool)
	}
	overrides := map[string]json.RawMessage{}
	for _, kv := range cfg.Annotations {
		name, raw, ok := strings.Cut(kv, "=")
		if _, known := declared[name]; !ok || !known {
			return nil, fmt.Errorf("demo: --annotations %q: want TOOL=JSON with a demo tool", kv)
		}
		if !json.Valid([]byte(raw)) {
			return nil, fmt.Errorf("demo: --annotations %s: %q is not JSON", name, raw)
		}
		overrides[name] = json.RawMessage(raw)
	}
	d := &demo{
		cfg:         cfg,
		fault:       f,
		ledger:      ledger{path: cfg.Ledger},
		marker:      cfg.Ledger + ".fault-fired",
		annotations: overrides,
		stderr:      io.Discard,
		cancels:     cancelWatch{calls: map[any]string{}, cancelled: map[string]bool{}},
		versions:    versions,
	}
	switch cfg.AfterFault {
	case "":
	case AfterFaultStripAnnotations, AfterFaultRemoveTool, AfterFaultRefuse:
		if _, err := os.Stat(d.marker); err == nil {
			d.after = cfg.AfterFault
		}
	default:
		return nil, fmt.Errorf("demo: unknown after-fault behaviour %q (valid: %s, %s, %s)", cfg.AfterFault, AfterFaultStripAnnotations, AfterFaultRemoveTool, AfterFaultRefuse)
	}
	if d.after == AfterFaultRefuse {
		return nil, fmt.Errorf("demo: refusing to start: a -once fault fired before (%s exists)", d.marker)
	}
	return d, nil
}

// After a -once fault fired, a NEW server process (the one a client
// reconnects to) can behave differently, to test what the client checks
// after rediscovery.
const (
	// AfterFaultStripAnnotations: tools/list sends no annotations at all.
	AfterFaultStripAnnotations = "strip-annotations"
	// AfterFaultRemoveTool: tools/list omits the fault tool.
	AfterFaultRemoveTool = "remove-tool"
	// AfterFaultRefuse: the server does not start (Serve returns an error).
	AfterFaultRefuse = "refuse"
)

// execute does what every call does before its tool body runs: the delay,
// the fault, and the ledger entry, in that order. It returns the entry's seq
// (0 when none was written, even with an error). An error means the body
// must not run.
func (d *demo) execute(ctx context.Context, req *mcp.CallToolRequest, drop dropFunc) (int, error) {
	if err := sleep(ctx, d.cfg.Delay); err != nil {
		return 0, err
	}
	name := req.Params.Name
	f := d.fault
	if d.cfg.FaultTool != "" && d.cfg.FaultTool != name {
		f = fault{}
	}
	if f.before {
		switch f.kind {
		case faultExit:
			exit(exitCode)
			return 0, errExitIntercepted
		case faultRPCError:
			return 0, f.rpcError()
		}
	}
	key, _ := req.Params.Meta[idempotencyKeyMeta].(string)
	var seq int
	var err error
	if !d.cfg.NoLedger {
		seq, err = d.ledger.append(name, req.Params.Arguments, key)
	}
	if err != nil || f.kind == faultNone {
		return seq, err
	}
	if f.once {
		fired, err := fireOnce(d.marker)
		if err != nil || !fired {
			return seq, err
		}
	}
	switch f.kind {
	case faultDrop:
		if drop != nil && drop(req) {
			return 0, errDropped
		}
		exit(exitCode) // nothing to drop: stdio
		return 0, errExitIntercepted
	case faultRPCError:
		return 0, f.rpcError()
	case faultHang:
		select {
		case <-ctx.Done():
		case <-d.done:
		}
		return seq, context.Canceled
	default:
		exit(exitCode)
		return 0, errExitIntercepted
	}
}

// rpcError returns a fresh copy of the fault's JSON-RPC error. It is
// returned unwrapped: go-sdk's typed tool handler passes an error through as
// a JSON-RPC error response only if it is a *jsonrpc.Error itself (a type
// assertion, not errors.As); any other error becomes an isError result.
func (f fault) rpcError() *jsonrpc.Error {
	e := *f.rpc
	return &e
}

// fireOnce creates the marker file and reports whether this call created
// it. The marker is fsynced (file and directory) before fireOnce returns, so
// a -once fault fires once across process restarts.
func fireOnce(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("demo: fault marker: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, fmt.Errorf("demo: fault marker: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("demo: fault marker: %w", err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
		return false, fmt.Errorf("demo: fault marker: %w", err)
	}
	return true, nil
}

// dropFunc closes the connection that would carry req's reply and reports
// whether it did.
type dropFunc func(req *mcp.CallToolRequest) bool

// connKey is the request-context key of the request's net.Conn; Serve's
// http.Server sets it in ConnContext.
type connKey struct{}

func connOf(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}

// dropHeader is the request header through which [connRegistry.wrap] tells a
// tool call which connection carries it. The SDK hands the POST's header to
// the handler as CallToolRequest.Extra.Header.
const dropHeader = "Mcpflow-Demo-Conn"

// connRegistry lets a streamable HTTP tool call find the connection of the
// POST that carries it.
type connRegistry struct {
	mu    sync.Mutex
	next  uint64
	conns map[string]net.Conn
}

// wrap registers the connection of each POST for the duration of the
// request and stamps the request with its token, overwriting any token the
// client sent.
func (cr *connRegistry) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn := connOf(r)
		if r.Method != http.MethodPost || conn == nil {
			r.Header.Del(dropHeader)
			h.ServeHTTP(w, r)
			return
		}
		cr.mu.Lock()
		cr.next++
		token := strconv.FormatUint(cr.next, 10)
		if cr.conns == nil {
			cr.conns = make(map[string]net.Conn)
		}
		cr.conns[token] = conn
		cr.mu.Unlock()
		defer func() {
			cr.mu.Lock()
			delete(cr.conns, token)
			cr.mu.Unlock()
		}()
		r.Header.Set(dropHeader, token)
		h.ServeHTTP(w, r)
	})
}

// drop is the dropFunc of the streamable HTTP server.
func (cr *connRegistry) drop(req *mcp.CallToolRequest) bool {
	if req.Extra == nil || req.Extra.Header == nil {
		return false
	}
	cr.mu.Lock()
	conn := cr.conns[req.Extra.Header.Get(dropHeader)]
	cr.mu.Unlock()
	if conn == nil {
		return false
	}
	conn.Close()
	return true
}

// dropConn is the dropFunc of an SSE session: the replies travel on the
// session's GET stream, so dropping means closing that stream's connection.
func dropConn(conn net.Conn) dropFunc {
	if conn == nil {
		return nil
	}
	return func(*mcp.CallToolRequest) bool {
		conn.Close()
		return true
	}
}
