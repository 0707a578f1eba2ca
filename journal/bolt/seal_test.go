package bolt

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestSealedPayloads: with a key, inputs, outputs, arguments and results are
// encrypted in the file and read back faithfully; without the key they read
// as sealed and writes are refused; another key is refused.
func TestSealedPayloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	key := journal.NewKey()
	j, err := Open(path, &journal.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	r := &journal.Run{Workflow: "wf", Inputs: map[string]any{"token": "SECRET-INPUT-1"}, Secrets: []string{"token"}}
	if err := j.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	in, err := j.Begin(&journal.Invocation{RunID: r.ID, Step: "s", Item: -1, Server: "s", Tool: "t", Arguments: json.RawMessage(`{"card":"SECRET-ARG-2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	res := &journal.Result{Content: json.RawMessage(`[{"type":"text","text":"SECRET-RESULT-3"}]`)}
	if err := j.Finish(in, journal.Outcome{State: journal.StateCompleted, Result: res}); err != nil {
		t.Fatal(err)
	}
	if d := j.Digest([]byte(`{"card":"SECRET-ARG-2"}`)); !strings.HasPrefix(d, "hmac-sha256:") || d == journal.Digest([]byte(`{"card":"SECRET-ARG-2"}`)) {
		t.Errorf("digest %s, want a keyed one", d)
	}
	j.Close()
	raw, _ := os.ReadFile(path)
	for _, s := range []string{"SECRET-INPUT-1", "SECRET-ARG-2", "SECRET-RESULT-3"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("%s is in the file in clear", s)
		}
	}

	j, err = Open(path, &journal.Options{Key: key, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := j.Run(r.ID)
	inv, _ := j.Invocation(in.ID)
	j.Close()
	if got.Inputs["token"] != "SECRET-INPUT-1" || !strings.Contains(string(inv.Arguments), "SECRET-ARG-2") || !strings.Contains(string(inv.Result.Content), "SECRET-RESULT-3") || inv.Sealed != "" {
		t.Errorf("with the key: inputs %v, arguments %s, result %+v", got.Inputs, inv.Arguments, inv.Result)
	}

	j, err = Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	inv, _ = j.Invocation(in.ID)
	got, _ = j.Run(r.ID)
	j.Close()
	if inv.Arguments != nil || inv.Result != nil || inv.Sealed == "" || got.Inputs != nil || got.Sealed == "" || inv.State != journal.StateCompleted {
		t.Errorf("without the key: %+v / %+v, want the payload sealed and the rest readable", inv, got)
	}
	if _, err := Open(path, nil); !errors.Is(err, journal.ErrKeyRequired) {
		t.Errorf("write without the key: %v", err)
	}
	if _, err := Open(path, &journal.Options{Key: journal.NewKey()}); !errors.Is(err, journal.ErrWrongKey) {
		t.Errorf("another key: %v", err)
	}
}

func TestLoadKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg")
	t.Setenv(journal.KeyEnv, "")
	if k, err := journal.LoadKey(dir, false); k != nil || err != nil {
		t.Errorf("no key yet: %v %v", k, err)
	}
	k, err := journal.LoadKey(dir, true)
	if err != nil || k == nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, journal.KeyFile)); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", st.Mode().Perm())
	}
	again, _ := journal.LoadKey(dir, true)
	if again.ID() != k.ID() || strings.Contains(k.String(), k.Encode()) {
		t.Errorf("a second load gave another key, or String shows it")
	}
	t.Setenv(journal.KeyEnv, journal.NewKey().Encode())
	if env, _ := journal.LoadKey(dir, false); env.ID() == k.ID() {
		t.Error("the environment's key does not win")
	}
	os.Chmod(filepath.Join(dir, journal.KeyFile), 0o644)
	t.Setenv(journal.KeyEnv, "")
	if _, err := journal.LoadKey(dir, false); err == nil || !strings.Contains(err.Error(), "lets others read it") {
		t.Errorf("a key file others can read: %v", err)
	}
}
