package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/journal"
)

type serverOptions struct {
	ioStreams
	g         *globals
	listen    string
	tokenFile string
	grace     time.Duration
	socket    string
	workerID  string
	lease     time.Duration
	maxRuns   int
	hosts     []string
}

func newServerCommand(g *globals, runF func(context.Context, *serverOptions) error) *cobra.Command {
	o := &serverOptions{g: g}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Own the workspace's journal: run workflows submitted to it and serve the API and the web UI",
		Long: `Run mcpflow as a long-running server that owns the workspace's journal (or
--journal). It runs the workflows submitted to it, many at once, and serves an
HTTP API and a web UI on a unix socket beside the journal (.mcpflow/mcpflow.sock,
mode 0600) and, with --listen, on TCP. While it runs, mcpflow commands in the
workspace go through it.

On start it resumes the runs that were running when the journal's owner last
stopped, under the replay rule. SIGTERM or Ctrl-C stops taking work, lets calls
in flight finish for --grace, then aborts the rest (journaled as a crash would
leave them) and exits; the next start resumes them.

With a PostgreSQL journal (--journal postgres://… or MCPFLOW_JOURNAL), several
servers — on one machine or many — are workers that share the runs: each claims
the runs submitted for any worker ('mcpflow run FILE --detach') and the runs of
a worker that died or stopped answering (its --lease expired), and resumes them
as after a crash. A worker paused past its lease has its writes refused once
another took its runs over. Each worker connects to the MCP servers it needs
itself, and needs the journal's key (MCPFLOW_JOURNAL_KEY) when payloads are
encrypted.

A --listen address that is not loopback needs --token-file: a file private to
you (mode 0600) holding the token clients send as "Authorization: Bearer TOKEN".

On TCP the server answers only to the host names localhost, a loopback
address, the host of --listen and the names given with --allowed-host; any
other Host is refused (403), so that a web page whose name was made to resolve
to this machine (DNS rebinding) cannot use the API. The API reads workflow
files only from inside the workspace (outside .mcpflow); mcpflow commands send
the workflow's text instead.`,
		Example: `  mcpflow server
  mcpflow server --listen 127.0.0.1:7070
  mcpflow server --listen 0.0.0.0:7070 --token-file ~/.config/mcpflow/token --allowed-host ci.example.com
  MCPFLOW_JOURNAL=postgres://mcpflow@db/mcpflow mcpflow server --worker-id w1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runServer(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.listen, "listen", "", "also serve on this TCP address (host:port)")
	cmd.Flags().StringVar(&o.tokenFile, "token-file", "", "file holding the token TCP clients must send (required off loopback)")
	cmd.Flags().DurationVar(&o.grace, "grace", 10*time.Second, "on SIGTERM, how long calls in flight may finish before they are aborted")
	cmd.Flags().StringVar(&o.socket, "socket", "", "the unix socket to serve on (default: mcpflow.sock beside the journal file, or in the workspace's .mcpflow for a PostgreSQL journal; commands in the workspace find the default one)")
	cmd.Flags().StringVar(&o.workerID, "worker-id", "", "with a PostgreSQL journal: this worker's name, unique among live workers (default host:pid)")
	cmd.Flags().DurationVar(&o.lease, "lease", journal.DefaultLease, "with a PostgreSQL journal: how long this worker's runs stay its own without a heartbeat")
	cmd.Flags().StringArrayVar(&o.hosts, "allowed-host", nil, "a host name the TCP listener also answers to (repeatable): the name you reach it by, besides localhost, loopback addresses and the --listen host")
	cmd.Flags().IntVar(&o.maxRuns, "max-runs", 32, "with a PostgreSQL journal: how many runs this worker keeps going at once (it claims free runs up to it)")
	return cmd
}

// socketPath is the server's unix socket: beside a bbolt journal, in the
// workspace's .mcpflow for a PostgreSQL one.
func (g *globals) socketPath() string {
	if journal.IsPostgres(g.journalPath) {
		return filepath.Join(g.workspace, ".mcpflow", "mcpflow.sock")
	}
	return filepath.Join(filepath.Dir(g.journalPath), "mcpflow.sock")
}

func runServer(ctx context.Context, o *serverOptions) error {
	token, err := readToken(o.tokenFile)
	if err != nil {
		return err
	}
	if len(o.hosts) > 0 && o.listen == "" {
		return usageError("--allowed-host names a host the TCP listener answers to: it needs --listen")
	}
	for _, h := range o.hosts {
		if h == "" || strings.ContainsAny(h, "/:@ *,") || strings.HasSuffix(h, ".") {
			return usageError("--allowed-host %q: give one host name (ci.example.com), without a scheme, a port, a wildcard or a final dot; repeat the flag for more (loopback addresses are always allowed)", h)
		}
	}
	if o.lease < time.Second {
		return usageError("--lease %s: use at least 1s (the heartbeat comes every third of it)", o.lease)
	}
	o.g.worker = journal.Options{Worker: o.workerID, Lease: o.lease, Serves: true}
	socket := o.socket
	if socket == "" {
		socket = o.g.socketPath()
	}
	svc, done, err := o.g.service(writeJournal)
	if err != nil {
		return err
	}
	defer done()
	srv, err := door.NewServer(svc, door.ServeOptions{
		Workspace: o.g.workspace, Socket: socket, Listen: o.listen, Token: token, Grace: o.grace, By: osUser(),
		MaxRuns: o.maxRuns, AllowedHosts: o.hosts, Version: version,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(o.Err, "%s mcpflow server: %s\n", time.Now().Format(time.TimeOnly), fmt.Sprintf(format, args...))
		},
	})
	if err != nil {
		return usageError("%v", err)
	}
	if err := srv.Start(); err != nil {
		// The journal opens after the socket: a command that holds it
		// answers there, and fails the listen.
		if held := heldBy(socket); held != nil {
			return held
		}
		return err
	}
	fmt.Fprintf(o.Out, "mcpflow server: journal %s\n  socket: %s\n", journal.Redact(o.g.journalPath), socket)
	if id := srv.Worker(); id != "" {
		fmt.Fprintf(o.Out, "  worker: %s (lease %s, up to %d runs)\n", id, o.lease, o.maxRuns)
	}
	if a := srv.Addr(); a != nil {
		fmt.Fprintf(o.Out, "  http://%s/\n  MCP (streamable HTTP): http://%s/mcp\n", a, a)
		if token != "" {
			fmt.Fprintf(o.Out, "  sign in once at http://%s/login with the token in %s\n", a, o.tokenFile)
		}
	}
	<-ctx.Done()
	fmt.Fprintf(o.Err, "mcpflow server: stopping (calls in flight have %s to finish)\n", o.grace)
	stop, cancel := context.WithTimeout(context.Background(), o.grace+30*time.Second)
	defer cancel()
	return srv.Stop(stop)
}

// readToken reads the token file, which must be private to its owner.
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", usageError("--token-file: %v", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", usageError("--token-file %s: mode %v lets others read it; make it private (chmod 600)", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usageError("--token-file: %v", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 16 {
		return "", usageError("--token-file %s: the token is %d characters; use at least 16 (e.g. openssl rand -hex 32)", path, len(token))
	}
	return token, nil
}
