package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/uuid"
	"github.com/rogpeppe/go-internal/diff"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
)

// throughServer says, for every script, what its server needs, or why the
// script does not run through a server.
//
// A demo server reads its fault (MCPFLOW_DEMO_FAULT, …) from its
// environment: in process, a run's demo server is started by the command,
// with the variables the script set for it; through a server, by the
// server, with the server's. A script that sets a fault for some commands
// runs here with the fault in the server's environment from the start,
// which is the same only when no other command calls the faulty tool.
var throughServer = map[string]struct {
	serverEnv []string // added to the script's environment for the server
	later     bool     // the script starts the server (serve), not Setup
	// stopAt: the served copy stops before the first line that begins
	// so, and the comparison with it.
	stopAt string
	drop   []string // lines of the script the served copy leaves out
	skip   string   // why the script does not run through a server
}{
	"approve-continue": {},
	"approve-reject":   {},
	"blocked-resolve-resume": {
		// The only other call of ledger_append is resolved, not sent.
		serverEnv: []string{"MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"},
	},
	"content": {
		// media and log are the other calls; ledger_append is called
		// once, with the fault.
		serverEnv: []string{"MCPFLOW_DEMO_FAULT=exit-after-commit", "MCPFLOW_DEMO_FAULT_TOOL=ledger_append"},
	},
	"crash-resume": {skip: "it crashes the process that holds a call in flight by killing mcpflow run (-9, in the background); " +
		"through a server that kills only a client, and the run goes on in the server (server.txtar kills the server instead). " +
		"Its fault (hang-after-commit on upper) would have to be the server's, and would hang the replay of resume as well"},
	"reads":         {},
	"resume-prompt": {later: true},
	"server":        {skip: "it starts and kills servers of its own, on the workspace's socket"},
	"trust-replay": {
		// The fault fires once, re-armed by the script (rm …fault-fired).
		serverEnv: []string{"MCPFLOW_DEMO_FAULT=exit-after-commit-once", "MCPFLOW_DEMO_FAULT_TOOL=upper"},
		// Its last part runs with --trust-workspace, which a server
		// refuses by design: it never grants trust over its API.
		stopAt: "# --trust-workspace trusts for one command only",
	},
	"validate-errors": {
		// A workflow that does not validate leaves no journal behind; a
		// server has its journal open from its start.
		drop: []string{"! exists .mcpflow/journal.db"},
	},
}

// serveScript is the setup of a script run through a server: a tag on
// each of its processes, and mcpflow server started in its work directory
// before the script runs — or by the script's serve command, when the
// script starts with what a server refuses. The server is stopped when the
// script ends.
func serveScript(env *testscript.Env) error {
	tag := uuid.NewString()
	env.Setenv(tagEnv, tag)
	how := throughServer[scriptName(env.WorkDir)]
	start := func(vars []string, deferred func(func())) error {
		stop, err := startScriptServer(env.WorkDir, slices.Concat(vars, how.serverEnv), tag)
		if err != nil {
			return err
		}
		deferred(func() {
			if err := stop(); err != nil {
				env.T().Fatal(err)
			}
		})
		return nil
	}
	if how.later {
		env.Values[serveKey{}] = start
		return nil
	}
	return start(env.Vars, env.Defer)
}

// serveKey is the Env.Values key of the function serve calls.
type serveKey struct{}

// serveCmd starts the server of a script run through one that starts
// with what a server refuses; in process it does nothing: serve.
func serveCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: serve")
	}
	start, _ := ts.Value(serveKey{}).(func([]string, func(func())) error)
	if start == nil {
		return
	}
	vars, _ := ts.Value(scriptEnvKey{}).([]string)
	ts.Check(start(vars, ts.Defer))
}

// startScriptServer starts mcpflow server in dir, with the environment vars
// (whose transcript it leaves out: what the server prints is not the
// script's), and waits until it answers. stop sends it SIGTERM, waits for
// it, and fails unless it exited cleanly and left no process tagged tag.
func startScriptServer(dir string, vars []string, tag string) (stop func() error, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "server", "--grace", "1s")
	cmd.Dir = dir
	cmd.Env = slices.DeleteFunc(slices.Clone(vars), func(kv string) bool { return strings.HasPrefix(kv, transcriptEnv+"=") })
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	stop = func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("mcpflow server still going 30 s after SIGTERM; killed:\n%s", out.String())
		}
		if !cmd.ProcessState.Success() {
			return fmt.Errorf("mcpflow server: %v:\n%s", cmd.ProcessState, out.String())
		}
		if pids := (&cli{tag: tag}).leftovers(2 * time.Second); len(pids) > 0 {
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			return fmt.Errorf("processes left running after mcpflow server stopped: %v", pids)
		}
		return nil
	}
	if err := waitServer(filepath.Join(dir, ".mcpflow", "mcpflow.sock"), 30*time.Second, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%v:\n%s", err, out.String())
	}
	return stop, nil
}

// comparedOnly writes a copy of each script for its run through a
// server, and returns their files. In a copy, the assertions on what
// mcpflow printed (stdout, stderr, cmp stdout) are comments, and a command
// may exit as it does (anyexit exec, anyexit ptyexec): the comparison with
// the in-process transcript, which passed them, checks all that and says
// more, and the script goes on to its end when a command differs. What the
// script checks of files stays, but for the lines throughServer drops; the
// copy stops at its stopAt.
func comparedOnly(t *testing.T, files []string) []string {
	dir := t.TempDir()
	var out []string
	for _, f := range files {
		a, err := txtar.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		how := throughServer[scriptName(f)]
		lines := strings.SplitAfter(string(a.Comment), "\n")
		for i, line := range lines {
			text := strings.TrimSpace(line)
			if how.stopAt != "" && strings.HasPrefix(text, how.stopAt) {
				lines = append(lines[:i], "stop 'the rest does not run through a server'\n")
				break
			}
			if slices.Contains(how.drop, text) {
				lines[i] = "# (not through a server) " + line
				continue
			}
			cmd := strings.TrimPrefix(strings.TrimPrefix(text, "! "), "? ")
			switch verb, args, _ := strings.Cut(cmd, " "); {
			case verb == "stdout", verb == "stderr", verb == "cmp" && (strings.HasPrefix(args, "stdout ") || strings.HasPrefix(args, "stderr ")):
				lines[i] = "# (compared) " + line
			case verb == "exec", verb == "ptyexec":
				lines[i] = "anyexit " + cmd + "\n"
			}
		}
		a.Comment = []byte(strings.Join(lines, ""))
		path := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(path, txtar.Format(a), 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, path)
	}
	return out
}

// A transcript is what a script's mcpflow commands did, in its work
// directory.
type transcript struct {
	work string
	recs []record
}

// scriptsInProcess holds the in-process transcripts of the scripts that
// passed, by script.
var scriptsInProcess transcripts

// transcripts are scripts' transcripts by script, kept as the scripts end
// (in parallel).
type transcripts struct {
	mu sync.Mutex
	m  map[string]*transcript
}

func (ts *transcripts) get(name string) *transcript {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.m[name]
}

func (ts *transcripts) set(name string, tr *transcript) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = make(map[string]*transcript)
	}
	if tr == nil {
		delete(ts.m, name)
		return
	}
	ts.m[name] = tr
}

// recordLocal is the setup of scripts run in process: their commands
// record what they did, kept in scriptsInProcess when the script passes.
func recordLocal(t *testing.T) func(*testscript.Env) error {
	return recordTo(t, &scriptsInProcess, true)
}

// recordTo returns a setup that has the script's commands record what they
// did, and keeps the transcript in into when the script ends — only when
// it passed, if onlyPassed.
func recordTo(t *testing.T, into *transcripts, onlyPassed bool) func(*testscript.Env) error {
	dir := t.TempDir()
	return func(env *testscript.Env) error {
		name := scriptName(env.WorkDir)
		into.set(name, nil)
		path := filepath.Join(dir, name+".jsonl")
		env.Setenv(transcriptEnv, path)
		env.Defer(func() {
			if f, ok := env.T().(interface{ Failed() bool }); onlyPassed && (!ok || f.Failed()) {
				return
			}
			recs, err := readTranscript(path)
			if err != nil {
				env.T().Fatal(err)
			}
			into.set(name, &transcript{work: env.WorkDir, recs: recs})
		})
		return nil
	}
}

// scriptName is the name of a script, from its file or its work directory.
func scriptName(path string) string {
	name := strings.TrimSuffix(filepath.Base(path), ".txtar")
	return strings.TrimPrefix(name, "script-")
}

// knownDifferences are what commands print differently through a server
// today, each a bug to fix unless it says otherwise. For a command of the
// script whose normalised command line (as the diff shows it, after
// "$ mcpflow"; * stands for any text) an entry matches, the comparison
// expects, in place of each text of replace the in-process transcript has
// (normalised), the text that follows it; the rest is compared as for any
// command. An entry whose commands print the same through a server now
// fails the test, so that the list only shrinks.
var knownDifferences = []struct {
	script, command string
	replace         []string // pairs: the text in process, the text through a server
}{
	// Not a bug: resume's refusal of a run started with --trust-workspace
	// (and its question, on a terminal) names the choices, and through a
	// server that flag is not one (trustChoices).
	{"resume-prompt", "resume --all*", []string{
		"; resume with --trust-workspace, trust the workspace", "; trust the workspace"}},
}

// compareTranscripts fails the test when a command of the script did
// anything different through the server, but for its knownDifferences.
func compareTranscripts(t *testing.T, name string, in, served *transcript) {
	t.Helper()
	a, b := &normaliser{work: in.work}, &normaliser{work: served.work}
	var ta, tb strings.Builder
	listed := make(map[int]bool) // knownDifferences met: whether a command differed
	for i := range max(len(in.recs), len(served.recs)) {
		var sa, sb string
		if i < len(in.recs) {
			sa = a.show(in.recs[i])
		}
		if i < len(served.recs) {
			sb = b.show(served.recs[i])
		}
		// Whether a run's end says it waited depends on how long it
		// waited (api.MinIdle), which a loaded machine decides, not the
		// mode.
		sa, sb = waitedSuffix.ReplaceAllString(sa, ""), waitedSuffix.ReplaceAllString(sb, "")
		if sa != "" && sb != "" {
			if k := knownDifference(name, a.command(in.recs[i])); k >= 0 && k == knownDifference(name, b.command(served.recs[i])) {
				listed[k] = listed[k] || sa != sb
				sa = strings.NewReplacer(knownDifferences[k].replace...).Replace(sa)
			}
		}
		ta.WriteString(sa)
		tb.WriteString(sb)
	}
	for k, known := range knownDifferences {
		differed, met := listed[k]
		switch {
		case known.script != name:
		case !met:
			t.Errorf("script %s: knownDifferences lists %q, which it does not run: remove it", name, known.command)
		case !differed:
			t.Errorf("script %s: %q prints the same through a server now: remove it from knownDifferences", name, known.command)
		}
	}
	if d := diff.Diff("in process", []byte(ta.String()), "through a server", []byte(tb.String())); d != nil {
		t.Errorf("script %s: mcpflow printed differently through a server (knownDifferences applied to what it printed in process):\n%s", name, d)
	}
}

// waitedSuffix is the end of a run's last line when it waited: " (work
// <dur>, waited <dur>)", normalised.
var waitedSuffix = regexp.MustCompile(` \(work <dur>, waited <dur>\)`)

// knownDifference is the index of the knownDifferences entry of command
// in script, or -1.
func knownDifference(script, command string) int {
	for i, k := range knownDifferences {
		if k.script != script {
			continue
		}
		re := "^" + strings.ReplaceAll(regexp.QuoteMeta(k.command), `\*`, ".*") + "$"
		if regexp.MustCompile(re).MatchString(command) {
			return i
		}
	}
	return -1
}

// ptyExec runs mcpflow with its standard input and standard error on a
// pseudo-terminal (standard output stays a pipe, so progress is printed as
// lines), answers the first question ending in "[y/N] " with ANSWER, and
// records the command in the transcript: ptyexec ANSWER mcpflow ARGS...
// What mcpflow printed is the command's stdout, and what appeared on the
// terminal (its stderr, the question, the answer's echo) its stderr. The
// command runs in the script's environment as Setup left it.
func ptyExec(ts *testscript.TestScript, neg bool, args []string) {
	switch code := scriptPty(ts, args); {
	case neg && code == 0:
		ts.Fatalf("unexpected mcpflow success")
	case !neg && code != 0:
		ts.Fatalf("mcpflow exited %d", code)
	}
}

// scriptPty runs ptyexec's command and returns its exit code.
func scriptPty(ts *testscript.TestScript, args []string) int {
	if len(args) < 2 || args[1] != "mcpflow" {
		ts.Fatalf("usage: ptyexec ANSWER mcpflow ARGS...")
	}
	answer, args := args[0], args[2:]
	exe, err := os.Executable()
	ts.Check(err)
	ptmx, tty, err := pty.Open()
	if err != nil {
		ts.Fatalf("no pty: %v", err)
	}
	defer ptmx.Close()
	cmd := exec.Command(exe, args...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env, _ = ts.Value(scriptEnvKey{}).([]string)
	var stdout lockedBuffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		tty.Close()
		ts.Fatalf("%v", err)
	}
	tty.Close()
	var term lockedBuffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(&term, ptmx) // ends with EIO once the child's side is closed
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	asked := false
	var werr error
wait:
	for deadline := time.Now().Add(60 * time.Second); ; {
		select {
		case werr = <-exited:
			break wait
		case <-time.After(5 * time.Millisecond):
		}
		if !asked && strings.Contains(term.String(), "[y/N] ") {
			ptmx.Write([]byte(answer + "\n"))
			asked = true
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			ts.Fatalf("mcpflow %s still going after 60 s; killed:\n%s", strings.Join(args, " "), term.String())
		}
	}
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		ts.Fatalf("the terminal of mcpflow %s stayed open after it exited", strings.Join(args, " "))
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		ts.Fatalf("%v", werr)
	}
	code := cmd.ProcessState.ExitCode()
	shown := strings.ReplaceAll(term.String(), "\r\n", "\n")
	fmt.Fprint(ts.Stdout(), stdout.String())
	fmt.Fprint(ts.Stderr(), shown)
	if path := ts.Getenv(transcriptEnv); path != "" {
		r := record{Args: args, Tty: answer, Code: code, Stdout: stdout.String(), Stderr: shown}
		ts.Check(appendRecord(path, r))
	}
	return code
}

// anyExit runs exec or ptyexec and lets the command exit as it does:
// anyexit exec|ptyexec ARGS...
func anyExit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: anyexit exec|ptyexec ARGS...")
	}
	switch args[0] {
	case "exec":
		if strings.HasPrefix(args[len(args)-1], "&") {
			ts.Fatalf("anyexit exec: not in the background")
		}
		var ee *exec.ExitError
		if err := ts.Exec(args[1], args[2:]...); err != nil && !errors.As(err, &ee) {
			ts.Fatalf("%v", err)
		} else if err != nil {
			ts.Logf("[%v]", err)
		}
	case "ptyexec":
		ts.Logf("[exit %d]", scriptPty(ts, args[1:]))
	default:
		ts.Fatalf("usage: anyexit exec|ptyexec ARGS...")
	}
}

// resumePromptScript writes the script of resume's question (it needs
// ptyexec, so it is kept here) and returns its file.
func resumePromptScript(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "resume-prompt.txtar")
	if err := os.WriteFile(path, []byte(resumePrompt), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// resumePrompt: a run started with --trust-workspace in a workspace the
// user does not trust is resumed without the flag only when the user
// confirms: on a terminal by answering resume's question, elsewhere with
// --untrusted. Also --json, --jq and the blocked-run report.
const resumePrompt = `# The run stops at the approval, its first call sent trusting the workspace by the
# flag, which a server refuses: it runs in process, and a server (when the
# script runs through one) starts after it.
! exec mcpflow run gate.yaml --trust-workspace
stdout '^step hello +completed'
stderr 'is blocked: MCPFLOW_APPROVAL_REQUIRED'
serve

# Elsewhere than on a terminal resume refuses and names the flags.
! exec mcpflow resume --all
stderr 'was started with --trust-workspace'
stderr '--untrusted'

# On a terminal it asks; no is no.
! ptyexec n mcpflow resume --all
stderr 'Resume without workspace trust\? \[y/N\] n$'
stderr 'not resumed'

# Yes goes on: the run still waits for its approval.
! ptyexec y mcpflow resume --all
stdout 'nothing to resume'
stderr 'approve:  mcpflow approve'

# --json picks fields, an unknown one lists them; --jq filters.
exec mcpflow runs list --json workflow,status
stdout '"status": "blocked"'
! exec mcpflow runs list --json workflow,colour
stderr 'unknown field "colour"; available fields: .*workflow'
exec mcpflow runs list --jq '.[] | "\(.workflow) \(.status) \(.approvals[0].state)"'
stdout '^gate blocked pending$'
exec sh -c 'mcpflow approve $(mcpflow runs list --jq ".[0].id") ship --reason ok'
exec mcpflow resume --all --untrusted
stdout 'succeeded'
exec mcpflow journal list --json step,state,server,tool
stdout '"state": "completed"'

-- gate.yaml --
name: gate
servers:
  demo: {builtin: demo}
steps:
  - {id: hello, server: demo, tool: greet, with: {name: gate}}
  - {id: ship, server: demo, tool: upper, with: {text: "${{ steps.hello.text }}"}, approve: "Ship it?"}
`
