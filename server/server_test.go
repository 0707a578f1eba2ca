package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/server"
	"github.com/mcpflow/mcpflow/servers"
	"github.com/mcpflow/mcpflow/servers/demo"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/trust"
)

// The test binary serves the demo when started as "TESTBINARY demo-server
// FLAGS…", so builtin servers run as real stdio subprocesses of it.
func TestMain(m *testing.M) {
	if servers.Supervising() {
		os.Exit(servers.Supervise(os.Args[1:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "demo-server" {
		var cfg demo.Config
		fs := pflag.NewFlagSet("demo-server", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		if err := fs.Parse(os.Args[2:]); err != nil {
			os.Exit(2)
		}
		if err := demo.Serve(context.Background(), cfg, os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rig is a server over a real service and journal in a fresh workspace.
type rig struct {
	t         *testing.T
	workspace string
	svc       *service.Service
	srv       *server.Server
}

func newRig(t *testing.T, o *server.Options) *rig {
	t.Helper()
	ws := t.TempDir()
	path := filepath.Join(ws, ".mcpflow", "journal.db")
	svc, err := service.New(nil, &service.Options{
		Workspace:   ws,
		TrustStore:  trust.OpenStore(t.TempDir()),
		OpenJournal: func() (*journal.Journal, error) { return journal.Open(path, nil) },
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{}
	if o != nil {
		opts = *o
	}
	opts.Service, opts.Workspace = svc, ws
	srv, err := server.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		svc.Close()
		if _, err := os.Stat(path); err == nil {
			journaltest.CheckFile(t, path)
		}
	})
	return &rig{t: t, workspace: ws, svc: svc, srv: srv}
}

func (r *rig) workflow(name, src string) string {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.workspace, name), []byte(src), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return name
}

// waitStatus waits for run to reach status.
func (r *rig) waitStatus(run string, want journal.RunStatus) *service.Report {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := r.svc.RunDetail(run)
		if err == nil && rep.Run.Status == want {
			return rep
		}
		if time.Now().After(deadline) {
			got := "no run"
			if err == nil {
				got = rep.Run.Status.String()
			}
			r.t.Fatalf("run %s: %s (%v), want %s", run, got, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
