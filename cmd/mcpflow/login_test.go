package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/oauth/oauthtest"
)

// A person logs in once with servers login ($BROWSER opens the URL); a run
// then calls the server with the kept token; servers list shows the login
// and no token; servers logout forgets it.
func TestServersLoginThenRun(t *testing.T) {
	t.Parallel()
	as := oauthtest.New(t)
	as.SetScopes("issues:read")
	c := newCLI(t)
	exe, _ := os.Executable()
	c.env = append(c.env, "BROWSER="+exe, browserEnv+"=1")
	os.WriteFile(filepath.Join(c.workspace, "mcpflow.yaml"), []byte("servers:\n  tracker:\n    url: "+as.URL+"\n    oauth:\n      scopes: [issues:write]\n"), 0o600)
	wf := filepath.Join(c.workspace, "count.yaml")
	os.WriteFile(wf, []byte("name: count\nsteps:\n  - id: one\n    server: tracker\n    tool: count\n"), 0o600)

	r := c.run("servers", "login", "tracker", "--trust-workspace")
	if r.code != 0 || !strings.Contains(r.stdout, "Logged in to server tracker") || !strings.Contains(r.stdout, "issues:read") || !strings.Contains(r.stdout, "issues:write") || !strings.Contains(r.stderr, "/authorize?") {
		t.Fatalf("servers login: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(c.config, "mcpflow", "tokens", "*.json"))
	if len(files) != 1 {
		t.Fatalf("logins kept: %v, want one under XDG_CONFIG_HOME/mcpflow/tokens", files)
	}
	kept, _ := os.ReadFile(files[0])
	var l struct {
		Token struct {
			AccessToken string `json:"access_token"`
		} `json:"token"`
	}
	json.Unmarshal(kept, &l)
	if l.Token.AccessToken == "" || strings.Contains(r.stdout+r.stderr, l.Token.AccessToken) {
		t.Fatalf("the access token was printed, or not kept")
	}

	if r := c.run("run", wf); r.code != 0 || as.Calls.Load() != 1 {
		t.Fatalf("run with the login: exit %d, %d calls\n%s\n%s", r.code, as.Calls.Load(), r.stdout, r.stderr)
	}

	r = c.run("servers", "list", "-o", "json", "--trust-workspace")
	var list []serverView
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || !strings.HasPrefix(list[0].Login, "logged in as "+oauthtest.Person+" until ") || strings.Contains(r.stdout, l.Token.AccessToken) {
		t.Fatalf("servers list: %v %+v\n%s", err, list, r.stderr)
	}
	r = c.run("servers", "list", "--trust-workspace")
	if !strings.Contains(r.stdout, "LOGIN") || !strings.Contains(r.stdout, "logged in as "+oauthtest.Person+" until") {
		t.Errorf("servers list table: %s", r.stdout)
	}

	if r := c.run("servers", "logout", "tracker"); r.code != 0 || !strings.Contains(r.stdout, "Logged out of server tracker") {
		t.Fatalf("servers logout: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(c.config, "mcpflow", "tokens", "*.json")); len(files) != 0 {
		t.Fatalf("after logout: %v", files)
	}
	if r := c.run("servers", "logout", "tracker"); r.code != 0 || !strings.Contains(r.stdout, "Not logged in") {
		t.Errorf("second logout: exit %d %s", r.code, r.stdout)
	}
}

// A run that meets a server it has no login for blocks (exit 3), saying
// which login to run; runs list says what it waits for; once logged in,
// resume runs it, and the server runs the call once.
func TestRunBlocksForALoginThenResumes(t *testing.T) {
	t.Parallel()
	runBlocksForALogin(t, false)
}

// The same through mcpflow server: the run it holds blocks for the login,
// stays blocked, and resumes through it once the person logged in, with
// the login the CLI kept (one store for both).
func TestRunBlocksForALoginThroughTheServer(t *testing.T) {
	t.Parallel()
	runBlocksForALogin(t, true)
}

func runBlocksForALogin(t *testing.T, served bool) {
	as := oauthtest.New(t)
	c := newCLI(t)
	if served {
		srv, stopped := c.startServer()
		t.Cleanup(func() {
			srv.Process.Signal(syscall.SIGTERM)
			stopped()
		})
	}
	exe, _ := os.Executable()
	c.env = append(c.env, "BROWSER="+exe, browserEnv+"=1")
	os.WriteFile(filepath.Join(c.workspace, "mcpflow.yaml"), []byte("servers:\n  tracker:\n    url: "+as.URL+"\n    oauth: {}\n"), 0o600)
	wf := filepath.Join(c.workspace, "count.yaml")
	os.WriteFile(wf, []byte("name: count\nsteps:\n  - id: one\n    server: tracker\n    tool: count\n"), 0o600)

	r := c.run("run", wf)
	m := regexp.MustCompile(`mcpflow: run (\S+) is blocked: MCPFLOW_LOGIN_REQUIRED: step one: server "tracker" needs a login \(none is stored\): run mcpflow servers login tracker, then mcpflow resume\n`).FindStringSubmatch(r.stderr)
	if r.code != exitBlocked || m == nil || as.Calls.Load() != 0 {
		t.Fatalf("run without a login: exit %d, %d calls, want %d, none\n%s\n%s", r.code, as.Calls.Load(), exitBlocked, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "journal resolve") || !strings.Contains(r.stderr, "continue: mcpflow resume "+m[1]+", once logged in") {
		t.Errorf("advice for a login-blocked run:\n%s", r.stderr)
	}
	if r := c.run("runs", "list"); !strings.Contains(r.stdout, "blocked") || !strings.Contains(r.stdout, "a server login") {
		t.Errorf("runs list:\n%s\n%s", r.stdout, r.stderr)
	}
	if r := c.run("servers", "login", "tracker", "--trust-workspace"); r.code != 0 {
		t.Fatalf("servers login: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("resume", m[1]); r.code != 0 || as.Calls.Load() != 1 {
		t.Fatalf("resume after the login: exit %d, %d calls, want 0, 1\n%s\n%s", r.code, as.Calls.Load(), r.stdout, r.stderr)
	}
}

// A worker on PostgreSQL without the login (its machine's store has none)
// blocks the run with that reason instead of failing it, and leaves it
// blocked; once logged in, resume finishes it with one call.
func TestWorkerWithoutTheLoginBlocksTheRun(t *testing.T) {
	location := journaltest.PostgresURL(t)
	t.Parallel()
	as := oauthtest.New(t)
	c := newCLI(t)
	exe, _ := os.Executable()
	workerConfig := t.TempDir()
	c.env = quickExit("MCPFLOW_JOURNAL="+location, journal.KeyEnv+"="+workersKey, "BROWSER="+exe, browserEnv+"=1")
	wf := c.workflow("count.yaml", "name: count\nservers:\n  tracker: {url: "+as.URL+", oauth: {}}\nsteps:\n  - {id: one, server: tracker, tool: count}\n")
	if r := c.run("servers", "login", "tracker", "--workflow", wf, "--trust-workspace"); r.code != 0 {
		t.Fatalf("servers login on the CLI's machine: exit %d\n%s", r.code, r.stderr)
	}
	saved := c.env
	c.env = append(slices.Clone(saved), "XDG_CONFIG_HOME="+workerConfig) // the worker's machine
	w := startWorker(c, "w1", "--lease", "2s")
	c.env = saved
	defer w.stop(t)
	j := openShared(t, location)
	defer j.Close()

	r := c.run("run", wf, "--detach")
	if r.code != 0 {
		t.Fatalf("run --detach: exit %d\n%s", r.code, r.stderr)
	}
	id := mustID(t, strings.TrimSpace(r.stdout))
	waitBlocked := func() *journal.Run {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			run, err := j.Run(id)
			if err != nil {
				t.Fatal(err)
			}
			if run.Status == journal.RunBlocked {
				return run
			}
			if time.Now().After(deadline) {
				t.Fatalf("run is %s, want blocked", run.Status)
			}
		}
	}
	run := waitBlocked()
	if run.Error == nil || run.Error.Code != engine.CodeLoginRequired || !strings.Contains(run.Error.Message, "mcpflow servers login tracker") || as.Calls.Load() != 0 {
		t.Fatalf("the worker's run: %+v, %d calls; want blocked for a login, no call", run.Error, as.Calls.Load())
	}
	time.Sleep(2500 * time.Millisecond) // more than a lease: nobody takes it up again
	if again, _ := j.Run(id); again.Status != journal.RunBlocked || as.Calls.Load() != 0 {
		t.Fatalf("a login-blocked run was taken up again: %s, %d calls", again.Status, as.Calls.Load())
	}

	// The person logs in where the worker runs too; resume (which runs the
	// run where it is typed, or hands it to a worker) finishes it, once.
	c.env = append(slices.Clone(saved), "XDG_CONFIG_HOME="+workerConfig)
	if r := c.run("servers", "login", "tracker", "--workflow", wf, "--trust-workspace"); r.code != 0 {
		t.Fatalf("servers login on the worker's machine: exit %d\n%s", r.code, r.stderr)
	}
	c.env = saved
	if r := c.run("resume", id.String()); r.code != 0 || as.Calls.Load() != 1 {
		t.Fatalf("resume: exit %d, %d calls; want 0, one\n%s%s", r.code, as.Calls.Load(), r.stdout, r.stderr)
	}
}
