package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/mcpapi"
	"github.com/mcpflow/mcpflow/service"
)

type mcpOptions struct {
	ioStreams
	g   *globals
	dir string
}

func newMCPCommand(g *globals, runF func(context.Context, *mcpOptions) error) *cobra.Command {
	o := &mcpOptions{g: g}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the workspace's workflows as MCP tools over stdio",
		Long: `Serve mcpflow as an MCP server on stdin and stdout, for an MCP client (Claude
Desktop, Claude Code, an IDE) to start. Each workflow file of the workspace (or
--dir) is a tool: its .yaml and .yml files, not mcpflow.yaml, not those of its
subdirectories. The tool's name is the workflow's name with every run of
characters other than ASCII letters, digits, _ and - made one _ (cut to 64);
workflows whose names meet are left out, and said so on stderr. Its arguments
are the workflow's inputs; its hints (read-only, idempotent, destructive) are
derived from its steps and their tools' own annotations, the safe defaults
when a server cannot be asked. Two more tools read the journal: list_runs and
show_run.

Calling a workflow's tool runs it as 'mcpflow run' does, durably, reporting a
progress notification per step; its outputs are the result. A run that waits
for a person — an approval gate, a call whose outcome is unknown, a server's
question — is a tool error naming the run and the command to type: no tool
approves, answers or resolves.

The journal is held only while a tool runs a workflow (other commands go
through this one meanwhile); while 'mcpflow server' serves the workspace,
the runs go there. Nothing but the protocol is written to stdout.`,
		Example: `  mcpflow mcp
  mcpflow mcp --dir workflows --workspace ~/project
  claude mcp add mcpflow -- mcpflow mcp --workspace ~/project`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams = streams(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runMCP(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.dir, "dir", "", "the directory whose workflow files are offered (default: the workspace)")
	return cmd
}

func runMCP(ctx context.Context, o *mcpOptions) error {
	dir := o.g.workspace
	if o.dir != "" {
		abs, err := filepath.Abs(o.dir)
		if err != nil {
			return usageError("--dir %s: %v", o.dir, err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return usageError("--dir %s: not an existing directory", o.dir)
		}
		dir = abs
	}
	local, done, err := o.g.service(noJournal)
	if err != nil {
		return err
	}
	defer done()
	h := &journalHolder{g: o.g, warn: o.Err}
	defer h.close()
	srv, err := mcpapi.New(&mcpapi.Options{
		Dir: dir, Local: local, Backend: h.backend, Version: version,
		Logf: func(format string, args ...any) { fmt.Fprintf(o.Err, "mcpflow mcp: "+format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	t := &mcp.IOTransport{Reader: io.NopCloser(o.In), Writer: nopWriteCloser{o.Out}}
	if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// journalHolder is how `mcpflow mcp` reaches the journal: a request that
// runs a workflow holds it as 'mcpflow run' does (owner: through mcpflow
// server when it serves the workspace, else here, serving other commands
// meanwhile), shared by the runs going at once and let go when the last
// ends, so that between calls 'mcpflow approve', 'resume' and 'journal
// resolve' find it free; a request that only reads uses the journal as
// held, or opens it to read.
type journalHolder struct {
	g    *globals
	warn io.Writer

	mu   sync.Mutex
	n    int         // requests holding it
	api  service.API // while n > 0
	done func()
}

func (h *journalHolder) backend(ctx context.Context, write bool) (service.API, func(), error) {
	h.mu.Lock()
	if !write && h.n == 0 {
		// The read holds h.mu until it is done: no run opens the journal
		// for writing meanwhile.
		h.g.serving = nil // who serves the journal may have changed
		b, done, err := h.g.backend(readJournal)
		if err != nil {
			h.mu.Unlock()
			return nil, nil, err
		}
		return b, func() { done(); h.mu.Unlock() }, nil
	}
	defer h.mu.Unlock()
	if h.n == 0 {
		h.g.serving = nil
		b, done, err := h.g.owner("mcpflow mcp", h.warn)
		if err != nil {
			return nil, nil, err
		}
		h.api, h.done = b, done
	}
	h.n++
	var once sync.Once
	return h.api, func() { once.Do(h.release) }, nil
}

func (h *journalHolder) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n--; h.n == 0 {
		h.done()
		h.api, h.done = nil, nil
	}
}

// close lets the journal go once the requests holding it are done: a
// client that went away cancelled their runs, which journal that they
// were cancelled (resume continues them). After closeWait it lets go
// anyway: a run cut then is left running, as after a crash, and resume
// continues it under the replay rule.
func (h *journalHolder) close() {
	deadline := time.Now().Add(closeWait)
	h.mu.Lock()
	for h.n > 0 && time.Now().Before(deadline) {
		h.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		h.mu.Lock()
	}
	defer h.mu.Unlock()
	if h.n > 0 && h.done != nil {
		h.done()
		h.api, h.done, h.n = nil, nil, 0
	}
}

// closeWait bounds how long mcpflow mcp waits, at its end, for the runs
// its client left to wind down.
const closeWait = 10 * time.Second
