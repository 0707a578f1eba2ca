package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSealedPayloads: with a key, inputs, outputs, arguments and results are
// encrypted in the file and read back faithfully; without the key they read
// as sealed and writes are refused; another key is refused.
func TestSealedPayloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	key := NewKey()
	j, err := Open(path, &Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Workflow: "wf", Inputs: map[string]any{"token": "SECRET-INPUT-1"}, Secrets: []string{"token"}}
	if err := j.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	in, err := j.Begin(&Invocation{RunID: r.ID, Step: "s", Item: -1, Server: "s", Tool: "t", Arguments: json.RawMessage(`{"card":"SECRET-ARG-2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	res := &Result{Content: json.RawMessage(`[{"type":"text","text":"SECRET-RESULT-3"}]`)}
	if err := j.Finish(in, Outcome{State: StateCompleted, Result: res}); err != nil {
		t.Fatal(err)
	}
	if d := j.Digest([]byte(`{"card":"SECRET-ARG-2"}`)); !strings.HasPrefix(d, "hmac-sha256:") || d == Digest([]byte(`{"card":"SECRET-ARG-2"}`)) {
		t.Errorf("digest %s, want a keyed one", d)
	}
	j.Close()
	raw, _ := os.ReadFile(path)
	for _, s := range []string{"SECRET-INPUT-1", "SECRET-ARG-2", "SECRET-RESULT-3"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("%s is in the file in clear", s)
		}
	}

	j, err = Open(path, &Options{Key: key, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := j.Run(r.ID)
	inv, _ := j.Invocation(in.ID)
	j.Close()
	if got.Inputs["token"] != "SECRET-INPUT-1" || !strings.Contains(string(inv.Arguments), "SECRET-ARG-2") || !strings.Contains(string(inv.Result.Content), "SECRET-RESULT-3") || inv.Sealed != "" {
		t.Errorf("with the key: inputs %v, arguments %s, result %+v", got.Inputs, inv.Arguments, inv.Result)
	}

	j, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	inv, _ = j.Invocation(in.ID)
	got, _ = j.Run(r.ID)
	j.Close()
	if inv.Arguments != nil || inv.Result != nil || inv.Sealed == "" || got.Inputs != nil || got.Sealed == "" || inv.State != StateCompleted {
		t.Errorf("without the key: %+v / %+v, want the payload sealed and the rest readable", inv, got)
	}
	if _, err := Open(path, nil); !errors.Is(err, ErrKeyRequired) {
		t.Errorf("write without the key: %v", err)
	}
	if _, err := Open(path, &Options{Key: NewKey()}); !errors.Is(err, ErrWrongKey) {
		t.Errorf("another key: %v", err)
	}
}

func TestLoadKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg")
	t.Setenv(KeyEnv, "")
	if k, err := LoadKey(dir, false); k != nil || err != nil {
		t.Errorf("no key yet: %v %v", k, err)
	}
	k, err := LoadKey(dir, true)
	if err != nil || k == nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, KeyFile)); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", st.Mode().Perm())
	}
	again, _ := LoadKey(dir, true)
	if again.ID() != k.ID() || strings.Contains(k.String(), k.Encode()) {
		t.Errorf("a second load gave another key, or String shows it")
	}
	t.Setenv(KeyEnv, NewKey().Encode())
	if env, _ := LoadKey(dir, false); env.ID() == k.ID() {
		t.Error("the environment's key does not win")
	}
	os.Chmod(filepath.Join(dir, KeyFile), 0o644)
	t.Setenv(KeyEnv, "")
	if _, err := LoadKey(dir, false); err == nil || !strings.Contains(err.Error(), "lets others read it") {
		t.Errorf("a key file others can read: %v", err)
	}
}
