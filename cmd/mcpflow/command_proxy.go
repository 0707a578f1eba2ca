package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/proxy"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/upstream"
)

type proxyOptions struct {
	ioStreams
	g              *globals
	server         string
	trustWorkspace bool
	http           string
	install        string
	config         string
}

func newProxyCommand(g *globals, runF func(context.Context, *proxyOptions) error) *cobra.Command {
	o := &proxyOptions{g: g}
	cmd := &cobra.Command{
		Use:   "proxy SERVER | --install CLIENT [--config FILE]",
		Short: "Stand in front of one MCP server for any MCP client, journaling every tool call",
		Long: `Serve MCP on stdin and stdout in front of SERVER, a server configured in the
workspace, for an MCP client (Claude Desktop, Claude Code, Cursor, VS Code,
Gemini CLI, Qwen Code): configure the client to start mcpflow proxy where it
started the server.

Everything the client and the server say passes through: tools, resources,
prompts, completions, subscriptions, log messages, progress, list changes, and
the server's elicitation, sampling and roots requests, which go to the client.
Each tools/call is a step of the session's run (workflow proxy:SERVER, the
client's name and version as its inputs): its intent is journaled before it is
forwarded, with the client's _meta and the idempotency key, and its outcome
before the client sees it. 'mcpflow runs list', 'journal list', the web UI and
/metrics show the calls of agents like any others.

When the connection to the server is lost, the replay rule decides, with the
same trust gates as a workflow: a call safe to send again is sent again after
reconnecting; otherwise the client receives a tool error with the stable
MCPFLOW_OUTCOME_UNKNOWN text, and the invocation waits for an operator's
'mcpflow journal resolve'. A proxy killed mid-call leaves its intent: the next
proxy of the same server (or 'mcpflow resume --all') settles it under the
rule, before serving.

Logs go to stderr; stdout is the MCP connection. With --http ADDR the proxy
serves streamable HTTP at http://ADDR/mcp instead, on a loopback address only,
refusing a Host or Origin that is not local (DNS rebinding): each MCP session
is a run of its own, ended when the client ends it or after 10 minutes idle.

--install CLIENT prints, and never writes, the change to a client's
configuration that routes its MCP servers through mcpflow proxy: the servers: to
add to mcpflow.yaml (secret values become ${VAR} references the client's entry
sets), a unified diff of the client's file (secret values shown redacted) and,
for Claude Code, the equivalent claude mcp commands. CLIENT is one of
claude-desktop, claude-code, cursor, vscode, gemini or qwen; the workspace's
own file is read first, else the user's; --config names another.`,
		Example: `  mcpflow proxy demo
  claude mcp add memory -- mcpflow --workspace ~/work proxy memory
  mcpflow proxy --install claude-desktop`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.install != "" && len(args) > 0:
				return usageError("--install CLIENT takes no SERVER: it routes every server of the client's configuration")
			case o.install == "" && o.config != "":
				return usageError("--config goes with --install CLIENT")
			case o.install == "" && len(args) != 1:
				return usageError("mcpflow proxy takes one SERVER, a server configured in the workspace (mcpflow servers list shows them)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if o.install != "" {
				return printInstall(cmd.Context(), o.g, o.Out, o.install, o.config)
			}
			o.server = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runProxy(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this session only")
	cmd.Flags().StringVar(&o.install, "install", "", "print the change to `CLIENT`'s configuration that routes its servers through mcpflow proxy (never written)")
	cmd.Flags().StringVar(&o.config, "config", "", "with --install: the client's configuration `file` (default: the workspace's, else the user's)")
	cmd.Flags().StringVar(&o.http, "http", "", "serve streamable HTTP at http://`ADDR`/mcp (a loopback address; port 0 picks a free one) instead of stdio")
	return cmd
}

func runProxy(ctx context.Context, o *proxyOptions) error {
	// The proxy's own service: configuration, trust, server sessions. It
	// never opens the journal: the sessions' runs write to sw, pointed at
	// the journal as the door holds it for each call.
	svc, closeSvc, err := o.g.service(writeJournal)
	if err != nil {
		return err
	}
	defer closeSvc()
	set, err := svc.External(o.g.workspace)
	if err != nil {
		return err
	}
	srv, err := set.Lookup(o.server)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if upstream.RoutedThroughProxy(srv) {
		// It would start itself, and again, without end.
		return usageError("server %s starts mcpflow proxy itself: configure the server's own command in mcpflow.yaml (mcpflow proxy --install prints how)", o.server)
	}
	sw := &service.JournalSwitch{}
	door := &proxyDoor{g: o.g, command: "mcpflow proxy " + o.server, warn: o.Err, server: o.server, trust: o.trustWorkspace, sw: sw}
	defer door.close()
	// Sessions left by proxies that are gone are settled before serving.
	release, err := door.acquire(ctx)
	if err != nil {
		return err
	}
	release()
	open := func(ctx context.Context, client *mcp.Implementation, peer upstream.Peer) (proxy.Session, error) {
		// Nothing is journaled yet: the run starts with the first call.
		s, err := svc.OpenProxy(ctx, service.ProxyRequest{Server: o.server, ClientName: client.Name, ClientVersion: client.Version,
			Peer: peer, Journal: sw, TrustWorkspace: o.trustWorkspace, Events: door.publish})
		if err != nil {
			return nil, err
		}
		return proxySession{Proxied: s, door: door}, nil
	}
	if o.http != "" {
		return serveProxyHTTP(ctx, o, open)
	}
	px := proxy.New(open, versionOf())
	in, _ := o.In.(io.ReadCloser)
	if in == nil {
		in = io.NopCloser(o.In)
	}
	err = px.Server().Run(ctx, &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{o.Out}})
	run, cerr := px.Close()
	if run != nil && run.Status != journal.RunSucceeded {
		fmt.Fprintf(o.Err, "mcpflow proxy: run %s ended %s: see 'mcpflow runs show %s'\n", run.ID.Short(), run.Status, run.ID.Short())
	}
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed)) {
		err = nil // the client went away: the session's end
	}
	return errors.Join(err, cerr)
}

// proxySession is a proxy's session (service.Proxied) whose journal the
// door holds for each call, and for the run's end.
type proxySession struct {
	*service.Proxied
	door *proxyDoor
}

func (s proxySession) Call(ctx context.Context, tool string, args json.RawMessage, fw *engine.Forward) (engine.Answer, error) {
	release, err := s.door.acquire(ctx)
	if err != nil {
		return engine.Answer{}, err
	}
	defer release()
	return s.Proxied.Call(ctx, tool, args, fw)
}

func (s proxySession) Close() (*journal.Run, error) {
	if s.Run() == nil { // no call, no run: nothing to journal
		return s.Proxied.Close()
	}
	release, err := s.door.acquire(context.Background())
	if err != nil {
		s.Proxied.Close() // the server's session ends; the run waits, running, for whoever settles it
		return nil, err
	}
	defer release()
	return s.Proxied.Close()
}

// Refind forgets the journal as held through a process that is gone:
// the next call finds it again.
func (s proxySession) Refind(context.Context) {
	s.door.invalidate()
	fmt.Fprintf(s.door.warn, "mcpflow proxy: the process the journal was written through is gone; the next write finds the journal again\n")
}

// serveProxyHTTP serves the proxy over streamable HTTP on a loopback
// address until ctx ends: one proxy, and one run, per MCP session.
func serveProxyHTTP(ctx context.Context, o *proxyOptions, open proxy.Opener) error {
	host, _, err := net.SplitHostPort(o.http)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--http %s: %v", o.http, err)}
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return &exitError{code: exitUsage, err: fmt.Errorf("--http %s: mcpflow proxy serves HTTP only on a loopback address (127.0.0.1, ::1 or localhost)", o.http)}
	}
	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		return err
	}
	// go-sdk asks for a server on every request (for its versions) and
	// keeps the one it asked for when a session starts: a proxy is kept
	// here only once a client opened it, until it closes.
	var mu sync.Mutex
	sessions := map[*proxy.Proxy]bool{}
	var wg sync.WaitGroup
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		var px *proxy.Proxy
		px = proxy.New(func(ctx context.Context, c *mcp.Implementation, peer upstream.Peer) (proxy.Session, error) {
			s, err := open(ctx, c, peer)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			sessions[px] = true
			mu.Unlock()
			wg.Add(1)
			go func() { // until the session ends; owned by serveProxyHTTP, which waits for it
				defer wg.Done()
				<-px.Done()
				mu.Lock()
				delete(sessions, px)
				mu.Unlock()
			}()
			return s, nil
		}, versionOf())
		return px.Server()
	}, &mcp.StreamableHTTPOptions{SessionTimeout: 10 * time.Minute})
	mux := http.NewServeMux()
	// go-sdk refuses a Host that is not local on a loopback listener;
	// this refuses a request a browser sends from another origin.
	mux.Handle("/mcp", http.NewCrossOriginProtection().Handler(h))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(o.Err, "mcpflow proxy: serving MCP for server %s at http://%s/mcp\n", o.server, ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	mu.Lock()
	live := make([]*proxy.Proxy, 0, len(sessions))
	for px := range sessions {
		live = append(live, px)
	}
	mu.Unlock()
	var errs []error
	for _, px := range live {
		if run, err := px.Close(); err != nil {
			errs = append(errs, err)
		} else if run != nil && run.Status != journal.RunSucceeded {
			fmt.Fprintf(o.Err, "mcpflow proxy: run %s ended %s; see 'mcpflow runs show %s'\n", run.ID.Short(), run.Status, run.ID.Short())
		}
	}
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(append(errs, err)...)
}
