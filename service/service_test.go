package service_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/trust"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/upstream/demo"
	"github.com/mcpflow/mcpflow/workflow"
)

// The test binary serves the demo when started as "TESTBINARY demo-server
// FLAGS…", so builtin servers run as real stdio subprocesses of it.
func TestMain(m *testing.M) {
	if upstream.Supervising() {
		os.Exit(upstream.Supervise(os.Args[1:]))
	}
	if code, ok := demo.ServeCommand(os.Args[1:]); ok {
		os.Exit(code)
	}
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// rig is a workspace with the demo server configured, and a service whose
// journal is opened on first use.
type rig struct {
	t         *testing.T
	workspace string
	journal   string
	svc       *service.Service
	// wrap, when set before the service first needs the journal, wraps
	// the store it opens.
	wrap func(journal.Store) journal.Store
}

func newRig(t *testing.T) *rig { return newRigOn(t, "", "") }

// newRigOn is newRig on the journal at location (a file, or a PostgreSQL
// URL, as worker, "" for the default); "" is the workspace's own file.
func newRigOn(t *testing.T, location, worker string) *rig {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "mcpflow.yaml"), []byte("servers:\n  demo: {builtin: demo, trust: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if location == "" {
		location = filepath.Join(ws, ".mcpflow", "journal.db")
	}
	r := &rig{t: t, workspace: ws, journal: location}
	svc, err := service.New(nil, &service.Options{
		Workspace:  ws,
		TrustStore: trust.OpenStore(t.TempDir()),
		OpenJournal: func() (journal.Store, error) {
			j, err := door.OpenStore(r.journal, &journal.Options{Worker: worker})
			if err == nil && r.wrap != nil {
				return r.wrap(j), nil
			}
			return j, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.Close()
		if _, err := os.Stat(r.journal); err == nil {
			journaltest.CheckFile(t, r.journal)
		}
	})
	r.svc = svc
	return r
}

func (r *rig) workflow(name, src string) string {
	r.t.Helper()
	p := filepath.Join(r.workspace, name)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// ledger reads the demo server's ledger: one row per execution.
func (r *rig) ledger() []map[string]any {
	r.t.Helper()
	f, err := os.Open(filepath.Join(r.workspace, demo.DefaultLedger))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			r.t.Fatal(err)
		}
		rows = append(rows, row)
	}
	return rows
}

// events collects engine events from any goroutine.
type events struct {
	mu   sync.Mutex
	list []engine.Event
	seen chan engine.Event
}

func newEvents() *events { return &events{seen: make(chan engine.Event, 1024)} }

func (e *events) add(ev engine.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
	e.seen <- ev
}

func (e *events) kinds() []engine.EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []engine.EventKind
	for _, ev := range e.list {
		out = append(out, ev.Kind)
	}
	return out
}

const hello = `name: hello
steps:
  - id: greet
    server: demo
    tool: greet
    with: {name: Ada}
  - id: shout
    server: demo
    tool: upper
    with: {text: "${{ steps.greet.text }}"}
`

func TestRunReportsTheCommittedRun(t *testing.T) {
	r := newRig(t)
	ev := newEvents()
	rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("hello.yaml", hello), Events: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run.Status != journal.RunSucceeded || rep.Run.FinishedAt == nil || len(rep.Invocations) != 2 || !rep.Acted {
		t.Fatalf("report: %+v with %d invocations", rep.Run, len(rep.Invocations))
	}
	for _, inv := range rep.Invocations {
		if inv.State != journal.StateCompleted || inv.Result == nil {
			t.Errorf("invocation %s: %s, result %v", inv.Step, inv.State, inv.Result)
		}
	}
	want := []engine.EventKind{engine.RunStarted, engine.StepStarted, engine.StepFinished, engine.StepStarted, engine.StepFinished, engine.RunFinished}
	if got := ev.kinds(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	// Resuming a run that succeeded does nothing and says so.
	again, err := r.svc.Resume(t.Context(), service.ResumeRequest{Run: rep.Run.ID.Short()})
	if err != nil || again.Acted || again.Run.Status != journal.RunSucceeded {
		t.Errorf("resume of a succeeded run: %+v, %v", again, err)
	}
	if n := len(r.ledger()); n != 2 {
		t.Errorf("%d executions, want 2", n)
	}
}

func TestInvalidRequestsWriteNothing(t *testing.T) {
	r := newRig(t)
	_, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("bad.yaml", "name: bad\nsteps:\n  - {id: a, server: demo, tool: greet, wiht: {}}\n")})
	if err == nil || !strings.Contains(err.Error(), `unknown key "wiht"`) {
		t.Fatalf("bad workflow: %v", err)
	}
	if _, err := os.Stat(r.journal); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a workflow that does not load created the journal: %v", err)
	}
	if _, err := r.svc.Call(t.Context(), service.CallRequest{Server: "nope", Tool: "greet"}); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("unknown server: %v, want ErrInvalid", err)
	}
	if _, err := r.svc.Call(t.Context(), service.CallRequest{Server: "demo", Tool: "greet", Args: []string{"name=1", "extra=x"}}); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("arguments the schema refuses: %v, want ErrInvalid", err)
	}
	if _, err := os.Stat(r.journal); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused call created the journal: %v", err)
	}
	if _, err := r.svc.RunDetail("0123"); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("unknown run: %v, want ErrInvalid", err)
	}
}

// TestCallSendsArgumentsAsGiven: a call's arguments are never evaluated,
// and its run resumes from the journaled definition.
func TestCallSendsArgumentsAsGiven(t *testing.T) {
	r := newRig(t)
	rep, err := r.svc.Call(t.Context(), service.CallRequest{Server: "demo", Tool: "put_record", ArgsJSON: `{"key": "k"}`, Args: []string{"value=${{ inputs.secret }}"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run.Status != journal.RunSucceeded {
		t.Fatalf("call: %+v", rep.Run)
	}
	rows := r.ledger()
	if len(rows) != 1 {
		t.Fatalf("ledger: %v", rows)
	}
	if args := rows[0]["args"].(map[string]any); args["value"] != "${{ inputs.secret }}" || args["key"] != "k" {
		t.Errorf("sent %v, want the arguments as given", args)
	}
	if _, err := r.svc.Resume(t.Context(), service.ResumeRequest{Run: rep.Run.ID.String()}); err != nil {
		t.Errorf("the call's journaled definition does not resume: %v", err)
	}
}

func TestCancelStopsARunGoingHere(t *testing.T) {
	r := newRig(t)
	wf := r.workflow("slow.yaml", "name: slow\nsteps:\n  - {id: count, server: demo, tool: count_slowly, with: {n: 1000, delay_ms: 20}}\n")
	ev := newEvents()
	done := make(chan *service.Report, 1)
	go func() {
		rep, err := r.svc.Run(context.Background(), service.RunRequest{File: wf, Events: ev.add})
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	var run journal.ID
	timeout := time.After(20 * time.Second)
	for run.IsZero() {
		select {
		case e := <-ev.seen:
			if e.Kind == engine.StepProgress {
				run = e.Run
			}
		case <-timeout:
			t.Fatal("the run never made progress")
		}
	}
	if err := r.svc.Cancel(run.Short(), "test"); err != nil {
		t.Fatal(err)
	}
	rep := <-done
	if rep == nil || rep.Run.Status != journal.RunCancelled || rep.Invocations[0].State != journal.StateAborted {
		t.Fatalf("after Cancel: %+v", rep)
	}
	if err := r.svc.Cancel(run.String(), ""); !errors.Is(err, service.ErrNotRunning) {
		t.Errorf("cancel of a finished run: %v, want ErrNotRunning", err)
	}
}

// TestToolsJudgesWithTheEnginesRule: the verdicts of Tools are replay.Judge
// under the trust a run would have.
func TestToolsJudgesWithTheEnginesRule(t *testing.T) {
	r := newRig(t)
	rep, err := r.svc.Tools(t.Context(), service.ToolsRequest{Server: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.ServerTrusted || rep.WorkspaceTrusted {
		t.Errorf("trust: server %v workspace %v, want server only", rep.ServerTrusted, rep.WorkspaceTrusted)
	}
	got := map[string]string{}
	for _, tv := range rep.Tools {
		got[tv.Tool.Name] = string(tv.Verdict.Reason) + "/" + string(tv.Declared)
	}
	if got["greet"] != "workspace_not_trusted/declared_read_only" || got["ledger_append"] != "workspace_not_trusted/no_annotations" {
		t.Errorf("verdicts %v", got)
	}
	trusted, err := r.svc.Tools(t.Context(), service.ToolsRequest{Server: "demo", TrustWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tv := range trusted.Tools {
		if tv.Tool.Name == "put_record" && tv.Verdict.Reason != "declared_idempotent" {
			t.Errorf("put_record with the workspace trusted: %+v", tv.Verdict)
		}
	}
}

func TestResolveRefusesAnIllegalTransition(t *testing.T) {
	r := newRig(t)
	rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("hello.yaml", hello)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.svc.Resolve(service.ResolveRequest{Invocation: rep.Invocations[0].ID.String(), As: journal.StateFailed, Reason: "x", By: "t"})
	if !errors.Is(err, service.ErrInvalid) {
		t.Errorf("resolving a completed invocation: %v, want ErrInvalid", err)
	}
}

// TestValidateDiscoverPlacesEveryProblem: validate with discovery reports
// the errors of the file and those the servers find in one list sorted by
// position, each at the place it is about: an unknown tool at its tool:,
// an argument at its value, a missing one at with:. A step with errors of
// its own is not discovered.
func TestValidateDiscoverPlacesEveryProblem(t *testing.T) {
	r := newRig(t)
	file := r.workflow("d.yaml", `name: d
steps:
  - id: a
    server: demo
    tool: gret
  - id: b
    server: demo
    tool: upper
    with: {}
  - id: c
    server: demo
    tool: nope
    wiht: {}
  - id: d
    server: demo
    tool: upper
    with:
      text: 5
`)
	_, err := r.svc.Validate(t.Context(), service.ValidateRequest{File: file, Discover: true})
	var errs workflow.Errors
	if !errors.As(err, &errs) || !errors.Is(err, workflow.ErrInvalid) || service.CodeOf(err).Exit != 2 {
		t.Fatalf("Validate: %T %v, want workflow.Errors (exit 2)", err, err)
	}
	want := []string{
		`5:11 step a: unknown tool "gret" on server "demo" (did you mean "greet"? it has: `,
		`9:11 step b: tool upper: argument text: missing (required)`,
		`13:5 steps[2]: unknown key "wiht" (did you mean "with"?)`,
		`18:13 step d: tool upper: argument text: `,
	}
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, e := range errs {
		if got := fmt.Sprintf("%d:%d %s", e.Line, e.Column, e.Msg); e.File != file || !strings.HasPrefix(got, want[i]) {
			t.Errorf("error %d: %s: %s, want %s", i, e.File, got, want[i])
		}
	}
}

// A service keeps the workflows it loaded (see loaded), but a run always
// has the file as it is now, against the servers configured now.
func TestRunsLoadTheFileAsItIsNow(t *testing.T) {
	r := newRig(t)
	greet := func(name string) string {
		return "name: hello\nsteps:\n  - {id: greet, server: demo, tool: greet, with: {name: " + name + "}}\n"
	}
	file := r.workflow("hello.yaml", greet("Ada"))
	for _, name := range []string{"Ada", "Ada", "Bob"} {
		r.workflow("hello.yaml", greet(name))
		rep, err := r.svc.Run(t.Context(), service.RunRequest{File: file})
		if err != nil || rep.Run.Status != journal.RunSucceeded {
			t.Fatalf("run: %v %v", rep, err)
		}
		if got := string(rep.Invocations[0].Arguments); !strings.Contains(got, name) {
			t.Errorf("run of the file greeting %s sent %s", name, got)
		}
	}
	if err := os.WriteFile(filepath.Join(r.workspace, "mcpflow.yaml"), []byte("servers:\n  other: {builtin: demo, trust: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Run(t.Context(), service.RunRequest{File: file}); err == nil || !strings.Contains(err.Error(), `"demo"`) {
		t.Fatalf("run after its server was renamed in mcpflow.yaml: %v; want an unknown server", err)
	}
}

// TestSubmitRefusedBeforeTheJournalOpens: a journal no other process
// shares cannot take a submitted run, so Local refuses it without opening
// the journal (its lock, the socket beside it) — a server starting
// meanwhile finds them free — after a workflow that does not load said so.
func TestSubmitRefusedBeforeTheJournalOpens(t *testing.T) {
	r := newRig(t)
	l := &service.Local{Service: r.svc}
	_, err := l.Submit(t.Context(), service.RunRequest{File: r.workflow("broken.yaml", "name: broken\nsteps: [\n")})
	if err == nil || errors.Is(err, service.ErrNotShared) {
		t.Fatalf("a workflow that does not load: %v, want its load error", err)
	}
	if _, err := l.Submit(t.Context(), service.RunRequest{File: r.workflow("hello.yaml", hello)}); !errors.Is(err, service.ErrNotShared) {
		t.Fatalf("submit on a journal of one process: %v, want ErrNotShared", err)
	}
	if _, err := os.Stat(r.journal); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused submissions opened the journal: %v", err)
	}
}

// resumeAtCreation is a journal that, once a new run's creation is
// durable and before the engine goes on (before its RunStarted), has
// another request resume the run, and sends what that resume returned.
type resumeAtCreation struct {
	journal.Store
	resume func(id journal.ID) error
	got    chan error
}

func (j *resumeAtCreation) CreateRunLater(r *journal.Run) (*journal.Pending, error) {
	p, err := j.Store.CreateRunLater(r)
	if err == nil {
		err = p.Wait()
	}
	if err == nil {
		j.got <- j.resume(r.ID)
	}
	return p, err
}

// TestNewRunIsGoingBeforeItCanBeRead: a resume that finds a new run in the
// journal the moment its creation commits, before the run reported its
// start, is refused as a run going here: it does not take the run for
// abandoned and run it a second time beside itself.
func TestNewRunIsGoingBeforeItCanBeRead(t *testing.T) {
	r := newRig(t)
	j := &resumeAtCreation{got: make(chan error, 1)}
	r.wrap = func(s journal.Store) journal.Store {
		j.Store = s
		return j
	}
	j.resume = func(id journal.ID) error {
		_, err := r.svc.Resume(t.Context(), service.ResumeRequest{Run: id.String()})
		return err
	}
	rep, err := r.svc.Run(t.Context(), service.RunRequest{File: r.workflow("hello.yaml", hello)})
	if err != nil || rep.Run.Status != journal.RunSucceeded {
		t.Fatalf("the run: %v %v", rep, err)
	}
	if err := <-j.got; !errors.Is(err, service.ErrRunning) {
		t.Fatalf("a resume of the new run as it was created: %v, want ErrRunning", err)
	}
	if invs, err := j.RunInvocations(rep.Run.ID); err != nil || len(invs) != 2 {
		t.Fatalf("the run's invocations: %d, %v; want its two steps' once", len(invs), err)
	}
}
