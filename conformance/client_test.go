package conformance_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// coreScenarios are the client scenarios besides auth/* that mcpflow can
// take part in: the others need what a workflow does not do (such as
// answering sampling).
var coreScenarios = []string{"initialize", "tools_call", "sse-retry", "elicitation-sep1034-client-defaults"}

// suiteTimeout is the suite's limit on one scenario's client (mcpflow
// under the race detector is slow to start; an auth scenario starts it
// up to six times).
const suiteTimeout = 60 * time.Second

// The official MCP conformance suite's client scenarios — the core ones
// above and every auth/* scenario the suite lists, the extensions
// included — pass with mcpflow as the client, but those
// expected-failures.yml lists, which must fail. Each scenario runs the
// suite once (a test server, then the driver, see driverMain), in
// parallel as go test's -parallel allows.
func TestClientConformance(t *testing.T) {
	bin, suite := node(t)
	names := clientScenarios(t, bin, suite)
	expected := expectedFailures(t)
	for name := range expected {
		if !slices.Contains(names, name) {
			t.Errorf("expected-failures.yml lists %s, which is not run (the scenarios run: %s)", name, strings.Join(names, ", "))
		}
	}
	var mu sync.Mutex
	var summary []string
	t.Cleanup(func() {
		slices.Sort(summary)
		t.Logf("conformance client scenarios:\n%s", strings.Join(summary, "\n"))
	})
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runScenario(t, bin, suite, name)
			reason, listed := expected[name]
			line := fmt.Sprintf("%s %s: %s", r.mark(), name, r.counts())
			switch {
			case r.passed && listed:
				t.Errorf("%s passes, but expected-failures.yml lists it (%s): remove the entry", name, reason)
			case !r.passed && !listed:
				t.Errorf("%s fails: %s\n%s", name, r.counts(), r.report())
			case !r.passed && listed:
				line += " (expected failure)"
				t.Logf("fails as expected (%s): %s\n%s", reason, r.counts(), r.report())
			}
			mu.Lock()
			summary = append(summary, line)
			mu.Unlock()
		})
	}
}

// clientScenarios are the scenarios to run: coreScenarios, and every
// auth/* client scenario `conformance list` names.
func clientScenarios(t *testing.T, bin, suite string) []string {
	t.Helper()
	out, err := exec.Command(bin, suite, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	_, client, ok := strings.Cut(string(out), "Client scenarios")
	if !ok {
		t.Fatalf("conformance list names no client scenarios:\n%s", out)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- (\S+)`).FindAllStringSubmatch(client, -1) {
		listed = append(listed, m[1])
	}
	names := slices.Clone(coreScenarios)
	for _, name := range coreScenarios {
		if !slices.Contains(listed, name) {
			t.Errorf("conformance list does not name the client scenario %s", name)
		}
	}
	for _, name := range listed {
		if strings.HasPrefix(name, "auth/") {
			names = append(names, name)
		}
	}
	return names
}

// expectedFailures reads expected-failures.yml: the scenarios that must
// fail, each with the reason (the comment above its entry, or above the
// entries before it up to one with a comment).
func expectedFailures(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("expected-failures.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("expected-failures.yml: %v", err)
	}
	out := map[string]string{}
	if len(doc.Content) == 0 {
		return out
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "client" {
			t.Fatalf("expected-failures.yml:%d: only client: scenarios are run here, not %s:", root.Content[i].Line, root.Content[i].Value)
		}
		reason := ""
		for _, item := range root.Content[i+1].Content {
			if c := strings.ReplaceAll(strings.TrimPrefix(item.HeadComment, "#"), "\n#", ""); strings.TrimSpace(c) != "" {
				reason = strings.Join(strings.Fields(c), " ")
			}
			if reason == "" {
				t.Errorf("expected-failures.yml:%d: %s has no reason (a comment above it)", item.Line, item.Value)
			}
			out[item.Value] = reason
		}
	}
	return out
}

// result is one scenario's outcome: the suite's verdict (its exit code)
// and its checks.
type result struct {
	passed bool
	output string // the suite's
	checks []check
	stderr string // the driver's, with mcpflow's
}

type check struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// runScenario runs the suite's scenario name with the driver as client.
func runScenario(t *testing.T, bin, suite, name string) result {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, suite, "client", "--command", self, "--scenario", name,
		"--timeout", fmt.Sprint(suiteTimeout.Milliseconds()), "-o", dir)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0", driverEnv+"=1", mcpflowEnv+"="+mcpflowBin)
	out, err := cmd.CombinedOutput()
	r := result{passed: err == nil, output: string(out)}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("conformance client: %v\n%s", err, out)
	}
	// The suite writes DIR/SCENARIO-TIME/checks.json; an auth/ scenario's
	// name makes a directory of its own.
	var files []string
	filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err == nil && filepath.Base(path) == "checks.json" {
			files = append(files, path)
		}
		return nil
	})
	if len(files) != 1 {
		t.Fatalf("conformance client wrote %d checks.json, want 1:\n%s", len(files), out)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r.checks); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	stderr, _ := os.ReadFile(filepath.Join(filepath.Dir(files[0]), "stderr.txt"))
	r.stderr = string(stderr)
	return r
}

func (r result) count(status string) int {
	n := 0
	for _, c := range r.checks {
		if c.Status == status {
			n++
		}
	}
	return n
}

func (r result) mark() string {
	if r.passed {
		return "✓"
	}
	return "✗"
}

// counts is the suite's summary line of the scenario.
func (r result) counts() string {
	s := fmt.Sprintf("%d passed, %d failed", r.count("SUCCESS"), r.count("FAILURE"))
	if w := r.count("WARNING"); w > 0 {
		s += fmt.Sprintf(", %d warnings", w)
	}
	return s
}

// report is what explains a failure: the failed and warning checks, the
// suite's last words and the driver's stderr.
func (r result) report() string {
	var b strings.Builder
	for _, c := range r.checks {
		if c.Status == "FAILURE" || c.Status == "WARNING" {
			fmt.Fprintf(&b, "  %s %s: %s %s\n", c.Status, c.ID, c.Description, c.ErrorMessage)
		}
	}
	out := r.output
	if i := strings.Index(out, "Test Results:"); i >= 0 {
		out = out[i:]
	}
	fmt.Fprintf(&b, "suite:\n%s\ndriver and mcpflow stderr:\n%s", strings.TrimSpace(out), strings.TrimSpace(r.stderr))
	return b.String()
}
