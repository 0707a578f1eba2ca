package bolt

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestSalvageSchema1: salvage reads a schema 1 journal, whose records carry
// no checksum.
func TestSalvageSchema1(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	j, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &journal.Run{Workflow: "w"}
	if err := j.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Begin(&journal.Invocation{RunID: r.ID, Step: "s", Item: -1, Server: "a", Tool: "b", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	makeSchema1(t, path)
	rep, err := Salvage(path, filepath.Join(dir, "out.db"), nil)
	t.Logf("runs=%d invs=%d lost=%v err=%v", rep.Runs, rep.Invocations, rep.Lost, err)
	if err != nil || rep.Runs != 1 || rep.Invocations != 1 || len(rep.Lost) != 0 {
		t.Errorf("schema-1 salvage: %+v, %v", rep, err)
	}
}
