package trust

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/upstream"
)

// writeOld writes a file and dates it a minute back, so that a resolver may
// cache what it read (a file changed within two seconds is read again).
func writeOld(t *testing.T, path, content string, age time.Duration) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-age)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

func TestResolverReadsOnlyWhatChanged(t *testing.T) {
	ws, storeDir := t.TempDir(), t.TempDir()
	conf := filepath.Join(ws, upstream.WorkspaceFile)
	writeOld(t, conf, "servers:\n  d: {builtin: demo, trust: true}\n", time.Hour)
	loads := 0
	r := NewResolver(&Options{
		Workspace: ws,
		Store:     OpenStore(storeDir),
		Own:       upstream.Set{"own": {Name: "own", Builtin: "demo", Trust: true}},
		External: func() (upstream.Set, []string, error) {
			loads++
			return upstream.LoadExternal(ws, "")
		},
	})
	for range 256 {
		if got := r.Trust("d"); got != (journal.Trust{Server: true}) {
			t.Fatalf("Trust(d) = %+v, want server trust only", got)
		}
	}
	if loads != 1 {
		t.Errorf("256 questions read the configuration %d times, want 1", loads)
	}
	if got := r.Trust("own"); !got.Server {
		t.Errorf("a workflow's own entry: %+v, want server trust", got)
	}
	if got := r.Trust("missing"); got.Server {
		t.Errorf("an unknown server is trusted: %+v", got)
	}

	// Trust removed from the configuration in the middle of the run.
	writeOld(t, conf, "servers:\n  d: {builtin: demo}\n", time.Minute)
	if got := r.Trust("d"); got.Server {
		t.Errorf("after trust was removed from mcpflow.yaml: %+v", got)
	}
	if loads != 2 {
		t.Errorf("a changed file was read %d times in all, want 2", loads)
	}

	// A configuration that no longer reads grants nothing.
	writeOld(t, conf, "servers: [\n", 30*time.Second)
	if got := r.Trust("d"); got.Server {
		t.Errorf("a broken mcpflow.yaml grants trust: %+v", got)
	}

	// The workspace gate follows the store.
	if err := OpenStore(storeDir).Add(ws); err != nil {
		t.Fatal(err)
	}
	got := r.Trust("own")
	if !got.Workspace || got.WorkspaceSource != "store:"+canon(t, ws) {
		t.Errorf("after trust add: %+v, want the workspace trusted by the store", got)
	}
	if err := OpenStore(storeDir).Remove(ws); err != nil {
		t.Fatal(err)
	}
	if got := r.Trust("own"); got.Workspace {
		t.Errorf("after trust remove: %+v, want untrusted", got)
	}

	flag := NewResolver(&Options{Workspace: ws, Store: OpenStore(storeDir), Flag: true})
	if ok, src := flag.Workspace(); !ok || src != "flag" {
		t.Errorf("--trust-workspace: %v %q, want true flag", ok, src)
	}
}

// TestResolverOptionalImportAppears: an optional import that did not exist
// is watched too: creating it changes the answer.
func TestResolverOptionalImportAppears(t *testing.T) {
	ws := t.TempDir()
	writeOld(t, filepath.Join(ws, upstream.WorkspaceFile), "import:\n  - {path: extra.yaml, optional: true}\nservers:\n  d: {builtin: demo}\n", time.Hour)
	r := NewResolver(&Options{Workspace: ws, Store: OpenStore(t.TempDir()),
		External: func() (upstream.Set, []string, error) { return upstream.LoadExternal(ws, "") }})
	if got := r.Trust("x"); got.Server {
		t.Fatalf("x trusted before it is configured: %+v", got)
	}
	writeOld(t, filepath.Join(ws, "extra.yaml"), "servers:\n  x: {builtin: demo, trust: true}\n", time.Minute)
	if got := r.Trust("x"); !got.Server {
		t.Errorf("x from a new optional import: %+v, want server trust", got)
	}
}
