package mcpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/workflow"
)

// Local is what a Server asks of the service where the workflow files
// are: a workflow loaded and checked against the configured servers, and
// a server's tools as discovered. *service.Service is one; it never opens
// the journal for either.
type Local interface {
	Validate(ctx context.Context, req service.ValidateRequest) (*workflow.Workflow, error)
	Tools(ctx context.Context, req service.ToolsRequest) (*service.ToolsReport, error)
}

var _ Local = (*service.Service)(nil)

// Backend returns the API one request works through, and the function
// that lets it go once the request is done: write is set for a request
// that runs a workflow, unset for one that only reads the journal. A
// front end decides there who holds the journal, and for how long.
type Backend func(ctx context.Context, write bool) (service.API, func(), error)

// Options configure a Server. Dir, Local and Backend are required.
type Options struct {
	// Dir holds the workflows offered as tools (see WorkflowFiles).
	Dir string
	// Local loads the workflows and discovers their servers' tools.
	Local Local
	// Backend reaches the journal for each request.
	Backend Backend
	// Version is the server's version in the MCP handshake.
	Version string
	// Logf, when set, receives a line per workflow left out and per
	// server whose tools could not be discovered. No argument value ever
	// reaches it.
	Logf func(format string, args ...any)
	// DiscoverTimeout bounds asking one server for its tools. Default
	// 15s.
	DiscoverTimeout time.Duration
	// DiscoverTTL is how long a server's tools, as discovered, are used
	// for the hints of the tools listed to new sessions (Handler).
	// Default 5m.
	DiscoverTTL time.Duration
}

// Server offers a directory's workflows, and list_runs and show_run, as
// MCP tools. Make one with New; serve it with Run (one session, e.g.
// stdio) or Handler (streamable HTTP, each session listing the
// directory's workflows as they are when it starts).
type Server struct {
	o Options

	mu         sync.Mutex
	discovered map[string]discovery // by server key (see serverKey)
}

// discovery is what one server said of its tools, and when.
type discovery struct {
	tools map[string][]byte // name → annotations as sent (nil: none)
	ok    bool              // false: it could not be asked
	at    time.Time
}

// New checks o and returns a Server. Nothing is loaded or started yet.
func New(o *Options) (*Server, error) {
	if o == nil || o.Dir == "" || o.Local == nil || o.Backend == nil {
		return nil, errors.New("mcpapi: Dir, Local and Backend are required")
	}
	s := &Server{o: *o, discovered: map[string]discovery{}}
	if s.o.DiscoverTimeout <= 0 {
		s.o.DiscoverTimeout = 15 * time.Second
	}
	if s.o.DiscoverTTL <= 0 {
		s.o.DiscoverTTL = 5 * time.Minute
	}
	if s.o.Version == "" {
		s.o.Version = "dev"
	}
	return s, nil
}

func (s *Server) logf(format string, args ...any) {
	if s.o.Logf != nil {
		s.o.Logf(format, args...)
	}
}

// WorkflowFiles lists the workflow files of dir, sorted: its .yaml and
// .yml files, not those of its subdirectories, and not mcpflow.yaml or
// mcpflow.yml (a workspace's configuration of servers).
func WorkflowFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrDir, dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") || strings.EqualFold(strings.TrimSuffix(name, filepath.Ext(name)), "mcpflow") {
			continue
		}
		out = append(out, filepath.Join(dir, name))
	}
	slices.Sort(out)
	return out, nil
}

// Tool is a workflow as offered: its tool and the file it runs.
type Tool struct {
	Tool     *mcp.Tool
	File     string
	Workflow *workflow.Workflow
}

// Catalog is what a Server offers: the workflows' tools by name, the
// collisions (workflows left out for a name they share), and the files
// left out because they do not load, with why.
type Catalog struct {
	Tools      []Tool // by name
	Collisions []Collision
	LeftOut    map[string]error
}

// Catalog loads the directory's workflows and makes their tools, their
// hints from the servers' tools as discovered (cached per server).
func (s *Server) Catalog(ctx context.Context) (*Catalog, error) {
	files, err := WorkflowFiles(s.o.Dir)
	if err != nil {
		return nil, err
	}
	c := &Catalog{LeftOut: map[string]error{}}
	loaded := map[string]*workflow.Workflow{}
	names := map[string]string{}
	for _, f := range files {
		wf, err := s.o.Local.Validate(ctx, service.ValidateRequest{File: f})
		if err != nil {
			c.LeftOut[f] = err
			s.logf("%s: not offered: %v", f, firstLine(err.Error()))
			continue
		}
		loaded[f], names[f] = wf, wf.Name
	}
	offered, collisions := assignNames(names)
	c.Collisions = collisions
	for _, col := range collisions {
		s.logf("%s", col)
	}
	for _, name := range slices.Sorted(maps.Keys(offered)) {
		file := offered[name]
		wf := loaded[file]
		c.Tools = append(c.Tools, Tool{Tool: s.toolOf(ctx, name, file, wf), File: file, Workflow: wf})
	}
	return c, nil
}

// toolOf is a workflow's tool: its name, description, input schema and
// hints.
func (s *Server) toolOf(ctx context.Context, name, file string, wf *workflow.Workflow) *mcp.Tool {
	desc := wf.Description
	if desc == "" {
		desc = "Runs the mcpflow workflow " + wf.Name + "."
	}
	steps := make([]StepHints, 0, len(wf.Steps))
	for _, st := range wf.Steps {
		if st.Resource != nil || st.Prompt != "" {
			steps = append(steps, StepHints{Read: true})
			continue
		}
		raw, found := s.annotations(ctx, file, wf, st.Server, st.Tool)
		steps = append(steps, HintsOf(raw, found))
	}
	return &mcp.Tool{
		Name: name, Title: wf.Name, Description: desc,
		InputSchema: InputSchema(wf),
		Annotations: Annotate(wf.Name, steps),
	}
}

// annotations is what server says of tool's annotations, as discovered:
// found false when the server could not be asked or does not list it.
func (s *Server) annotations(ctx context.Context, file string, wf *workflow.Workflow, server, tool string) ([]byte, bool) {
	key, req := server, service.ToolsRequest{Server: server}
	if srv, own := wf.Own[server]; own {
		// A workflow's own server may differ from a configured one of the
		// same name; workflows that define it alike share what it said.
		same := *srv
		same.Origin = "" // where it is written
		def, _ := json.Marshal(&same)
		key, req.Workflow = "own\x00"+string(def), file
	}
	s.mu.Lock()
	d, ok := s.discovered[key]
	s.mu.Unlock()
	if !ok || time.Since(d.at) > s.o.DiscoverTTL {
		d = discovery{tools: map[string][]byte{}, at: time.Now()}
		dctx, cancel := context.WithTimeout(ctx, s.o.DiscoverTimeout)
		rep, err := s.o.Local.Tools(dctx, req)
		cancel()
		if err != nil {
			s.logf("server %s: its tools' annotations are not known, so the hints of the workflows that call it are the safe defaults: %v", server, firstLine(err.Error()))
		} else {
			d.ok = true
			for _, t := range rep.Tools {
				d.tools[t.Tool.Name] = t.Tool.Annotations
			}
		}
		s.mu.Lock()
		s.discovered[key] = d
		s.mu.Unlock()
	}
	if !d.ok {
		return nil, false
	}
	raw, found := d.tools[tool]
	return raw, found
}

// MCP makes the MCP server of the catalog as it is now.
func (s *Server) MCP(ctx context.Context) (*mcp.Server, *Catalog, error) {
	c, err := s.Catalog(ctx)
	if err != nil {
		return nil, nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpflow", Title: "mcpflow workflows", Version: s.o.Version},
		&mcp.ServerOptions{Instructions: instructions})
	for _, t := range c.Tools {
		srv.AddTool(t.Tool, s.callWorkflow(t))
	}
	srv.AddTool(listRunsTool(), s.listRuns)
	srv.AddTool(showRunTool(), s.showRun)
	return srv, c, nil
}

// instructions tell a client what the tools are, and what only a person
// may do.
const instructions = `Each workflow tool starts a durable mcpflow run: every step's call is journaled before it is sent. ` +
	`A run that stops to wait for a person (an approval gate, a call whose outcome is unknown, a server's question) comes back as a tool error naming the run and the exact command the user must type; no tool approves, answers or resolves. ` +
	`list_runs and show_run read the journal.`

// Run serves one session on t (stdio: mcp.StdioTransport) until it ends
// or ctx is done.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	srv, c, err := s.MCP(ctx)
	if err != nil {
		return err
	}
	names := make([]string, len(c.Tools))
	for i, tool := range c.Tools {
		names[i] = tool.Tool.Name
	}
	if len(names) == 0 {
		s.logf("%v in %s (its .yaml and .yml files): serving list_runs and show_run only", ErrNoWorkflows, s.o.Dir)
	} else {
		s.logf("serving %d workflows of %s as tools: %s", len(names), s.o.Dir, strings.Join(names, ", "))
	}
	return srv.Run(ctx, t)
}

// Handler serves streamable HTTP: each new session gets the catalog as it
// is when it starts. It does no Host, Origin or token check of its own:
// the caller wraps it in the ones of the API it is served beside.
func (s *Server) Handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		srv, _, err := s.MCP(r.Context())
		if err != nil {
			s.logf("mcp: %v", err)
			return nil
		}
		return srv
	}, &mcp.StreamableHTTPOptions{
		// The one Host check is the API's (httpapi), which knows the
		// names the operator allowed.
		DisableLocalhostProtection: true,
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
