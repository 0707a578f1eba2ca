package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/oauth"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/trust"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// ServerSet is the configured servers: the workspace's and --servers', and
// with workflowFile ("" for none) that workflow's own, which win.
func (s *Service) ServerSet(workflowFile string) (upstream.Set, error) {
	return s.serverSet(workflowFile, nil)
}

// serverSet is ServerSet of a workflow given as its text (src), which
// workflowFile then only names; with src nil, it reads workflowFile.
func (s *Service) serverSet(workflowFile string, src []byte) (upstream.Set, error) {
	ext, err := s.External(s.o.Workspace)
	if err != nil {
		return nil, err
	}
	if workflowFile == "" && src == nil {
		return ext, nil
	}
	wf, err := s.loadWorkflow(workflowFile, src, ext)
	if err != nil {
		return nil, err
	}
	return wf.Servers, nil
}

// loadWorkflow loads the workflow whose text is src, named file; with src
// nil, the one file holds. A step naming a server that is nowhere is an
// error whose fields say where servers were looked for (see lookedFor).
func (s *Service) loadWorkflow(file string, src []byte, external upstream.Set) (*workflow.Workflow, error) {
	if src == nil {
		var err error
		if src, err = workflow.ReadFile(file); err != nil {
			return nil, err
		}
	}
	wf, err := s.loaded.load(file, src, external)
	return wf, s.lookedFor(err, file)
}

// lookedFor adds to err, when it is a step naming an unknown server
// (workflow.UnknownServerError) that is no typo of a known one, fields that say where servers were
// looked for: unknown_server, the name; workspace, the directory whose
// mcpflow.yaml was read (or was absent); read, the files read, one a line
// (none: no mcpflow.yaml and no --servers); workflow, the workflow file.
// Where else to look is the front end's to say.
func (s *Service) lookedFor(err error, file string) error {
	var us *workflow.UnknownServerError
	if !errors.As(err, &us) || us.Closest != "" {
		return err // a typo of a name it has: where it looked is beside the point
	}
	f := map[string]string{"unknown_server": us.Server, "workspace": s.o.Workspace, "workflow": file}
	if cfg, cerr := upstream.LoadConfig(s.o.Workspace, s.o.ServersFile); cerr == nil {
		f["read"] = strings.Join(cfg.Read, "\n")
	}
	return &fieldsError{err: err, fields: f}
}

// ServerStatus is a configured server and, when checked, whether it
// connects and how many tools it lists.
type ServerStatus struct {
	Server  *upstream.Server
	Checked bool
	Tools   int
	Err     error // why it did not connect, or why it was not started
	// Disabled, when set, says why the entry was read and left out (a
	// server asked for by name that is not in effect); it is not checked.
	Disabled *upstream.Disabled
	// Login is the person's login kept for a server with oauth: and the
	// authorization code grant; nil when there is none.
	Login *oauth.Login
}

// ErrUntrustedWorkspace: a command that only looks was asked to start (or
// connect to) a server whose entry comes from a file in a workspace the
// user has not trusted. Opening a directory must not run what its files
// say; running a workflow there is the user's explicit act.
var ErrUntrustedWorkspace = errors.New("the workspace is not trusted")

// mayStart says whether a command that only looks may start srv: yes for
// mcpflow's own demo server without arguments, and as trust.MayLook says
// for any other: for entries from the user's own files outside the
// workspace (imports from the home directory), from the --servers file
// the user named, and for any entry once the workspace is trusted (the
// trust store, or trustWorkspace for this command).
func (s *Service) mayStart(srv *upstream.Server, trustWorkspace bool) error {
	if srv.Builtin != "" && len(srv.Args) == 0 && len(srv.Env) == 0 {
		return nil
	}
	if trust.MayLook(trust.LookOptions{Workspace: s.o.Workspace, File: srv.File, Named: []string{s.o.ServersFile},
		Flag: trustWorkspace, Store: s.o.TrustStore}) {
		return nil
	}
	return fmt.Errorf("%w: server %q is defined in %s; mcpflow does not start servers defined by a workspace's files until you trust it (mcpflow trust add, or --trust-workspace for this command)", ErrUntrustedWorkspace, srv.Name, srv.File)
}

// Servers lists the configured servers (see ServerSet) by name, or only
// those names; with connect, each is started or connected to and its tools
// counted — except those defined by files of a workspace the user has not
// trusted (see ErrUntrustedWorkspace), which are reported unchecked with
// the reason. A name asked for that the configuration read and left out
// (upstream.Disabled) is reported with why; any other unknown name is an
// invalid request.
func (s *Service) Servers(ctx context.Context, workflowFile string, connect, trustWorkspace bool, names ...string) ([]ServerStatus, error) {
	set, err := s.ServerSet(workflowFile)
	if err != nil {
		return nil, err
	}
	pool := upstream.NewPool(set, s.lookOptions())
	defer pool.Close()
	if len(names) == 0 {
		names = set.Names()
	}
	out := make([]ServerStatus, 0, len(names))
	for _, name := range names {
		if _, err := set.Lookup(name); err != nil {
			d, err := s.leftOut(name, err)
			if d == nil {
				return nil, err
			}
			out = append(out, ServerStatus{Server: d.Server, Disabled: d})
			continue
		}
		st := ServerStatus{Server: set[name], Checked: connect}
		if o := set[name].OAuth; o != nil && o.GrantType() == oauth.GrantAuthorizationCode {
			st.Login, _ = upstream.StoredLogin(set[name], s.lookOptions()) // a damaged file shows as none; login replaces it
		}
		if err := s.mayStart(set[name], trustWorkspace); connect && err != nil {
			st.Checked, st.Err = false, err
		} else if connect {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			sess, err := pool.Session(cctx, name)
			if err == nil {
				var tools map[string]upstream.Tool
				tools, err = sess.Tools(cctx)
				st.Tools = len(tools)
			}
			cancel()
			st.Err = err
		}
		out = append(out, st)
	}
	return out, nil
}

// leftOut explains lookupErr, the error of a server name not configured:
// when the configuration read an entry of that name and left it out (see
// upstream.Disabled), it returns that and an invalid request saying why;
// else nil and lookupErr as an invalid request.
func (s *Service) leftOut(name string, lookupErr error) (*upstream.Disabled, error) {
	cfg, err := upstream.LoadConfig(s.o.Workspace, s.o.ServersFile)
	if err != nil {
		return nil, err
	}
	if d := cfg.Disabled[name]; d != nil {
		return d, &invalidError{msg: fmt.Sprintf("%v: left out: %s", lookupErr, d.Reason()), cause: lookupErr, fields: map[string]string{"server": name}}
	}
	return nil, &invalidError{msg: lookupErr.Error(), cause: lookupErr}
}

// ToolsRequest asks for a server's tools with their replay verdicts.
type ToolsRequest struct {
	Server string
	// Workflow, when set, is a workflow file whose servers are used too.
	Workflow string
	// TrustWorkspace judges as if the workspace were trusted.
	TrustWorkspace bool
}

// ToolVerdict is a tool as discovered, with the verdict the engine would
// journal for a lost call of it now.
type ToolVerdict struct {
	Tool upstream.Tool
	// Verdict is replay.Judge on the tool's annotations as declared, under
	// the current server and workspace trust: the same function, on the
	// same inputs, as the engine's decision.
	Verdict replay.Decision
	// Declared is the verdict on the annotations alone, trust assumed.
	Declared replay.Reason
}

// ToolsReport is a server's tools and the trust they were judged under.
type ToolsReport struct {
	Server           *upstream.Server
	ServerTrusted    bool
	WorkspaceTrusted bool
	Tools            []ToolVerdict // by name
}

// Tools connects to a server and judges each of its tools under the replay
// rule, with trust as the engine would read it for a run now.
func (s *Service) Tools(ctx context.Context, req ToolsRequest) (*ToolsReport, error) {
	sess, err := s.connectToList(ctx, req)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	srv := sess.Server()
	tools, err := sess.Tools(ctx)
	if err != nil {
		return nil, err
	}
	t := trust.NewResolver(&trust.Options{
		Workspace: s.o.Workspace, Flag: req.TrustWorkspace, Store: s.o.TrustStore,
		Own: upstream.Set{srv.Name: srv},
	}).Trust(srv.Name)
	rep := &ToolsReport{Server: srv, ServerTrusted: t.Server, WorkspaceTrusted: t.Workspace}
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		tool := tools[n]
		v, declared := verdictNow(t, tool)
		rep.Tools = append(rep.Tools, ToolVerdict{Tool: tool, Verdict: v, Declared: declared})
	}
	return rep, nil
}

// ValidateRequest checks a workflow without running it.
type ValidateRequest struct {
	File string
	// TrustWorkspace lets discovery start servers defined by the
	// workspace's files for this command only.
	TrustWorkspace bool
	// Discover connects to the servers the steps use and checks that each
	// tool exists and that literal arguments fit its input schema; that a
	// literal resource URI is one the server lists or one of a template's;
	// that each prompt exists and is given the arguments it requires and
	// none it does not take.
	Discover bool
}

// Validate loads and checks a workflow; with Discover, against the servers.
// Nothing is journaled or called. The problems found, by Load and by
// discovery (in the steps Load found no error in), are one workflow.Errors,
// sorted by position: every problem at once.
func (s *Service) Validate(ctx context.Context, req ValidateRequest) (*workflow.Workflow, error) {
	external, err := s.External(s.o.Workspace)
	if err != nil {
		return nil, err
	}
	if !req.Discover {
		wf, err := s.loadWorkflow(req.File, nil, external)
		if err == nil {
			err = wf.CheckRoots(s.o.Workspace)
		}
		if err != nil {
			return nil, err
		}
		return wf, nil
	}
	src, err := workflow.ReadFile(req.File)
	if err != nil {
		return nil, err
	}
	wf, err := workflow.LoadPartial(req.File, src, external)
	var problems workflow.Errors
	if (err != nil && !errors.As(err, &problems)) || wf == nil {
		return nil, err
	}
	problems = slices.Clone(problems)
	pool := upstream.NewPool(wf.Servers, s.lookOptions())
	defer pool.Close()
	for _, st := range wf.Steps {
		if err := s.mayStart(wf.Servers[st.Server], req.TrustWorkspace); err != nil {
			return nil, &invalidError{msg: err.Error(), cause: err}
		}
		sess, err := pool.Session(ctx, st.Server)
		if err == nil {
			err = discover(ctx, sess, st)
		} else {
			err = fmt.Errorf("server %q: %w", st.Server, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // interrupted: not a problem of the workflow
		}
		if err != nil {
			problems = append(problems, wf.StepError(st, err))
		}
	}
	if err := workflow.Join(problems...); err != nil {
		return nil, s.lookedFor(err, req.File)
	}
	return wf, nil
}

// discover checks one step against what its server lists (Validate's
// Discover).
func discover(ctx context.Context, sess *upstream.Session, st *workflow.Step) error {
	switch st.Method() {
	case journal.MethodRead:
		if uri, ok := st.LiteralResource(); ok {
			return sess.CheckResource(ctx, uri)
		}
		return nil // known only when the run gets there
	case journal.MethodPrompt:
		p, err := sess.Prompt(ctx, st.Prompt)
		if err != nil {
			return err
		}
		return workflow.CheckPromptArguments(st, p)
	}
	tool, err := sess.Tool(ctx, st.Tool)
	if err != nil {
		return err
	}
	return workflow.CheckLiteralArguments(st, tool)
}

// verdictNow is the replay verdict a lost call of tool would get under
// trust t (replay.Judge, no replay made yet), and the verdict on its
// annotations alone.
func verdictNow(t journal.Trust, tool upstream.Tool) (replay.Decision, replay.Reason) {
	_, declared := replay.Declared(tool.Annotations)
	return replay.Judge(replay.View{ServerTrusted: t.Server, WorkspaceTrusted: t.Workspace, Annotations: tool.Annotations}, 0), declared
}
