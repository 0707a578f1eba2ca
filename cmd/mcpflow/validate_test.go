package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestValidateReportsEveryError: mcpflow validate names every error of a
// file in one run, one a line with its file, line and column, sorted by
// position, and exits with the usage code; -o json lists the same errors
// as data.
func TestValidateReportsEveryError(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	file := c.workflow("many.yaml", `name: many
description: [not, a, string]
inputs:
  name: {type: strng}
env: HOME
servers:
  demo: {builtin: demo, trsut: true}
  local: {builtin: demo}
steps:
  - id: a
    server: dmeo
    tool: greet
    wiht: {name: x}
  - id: a
    server: local
    tool: greet
    timeout: soon
  - id: b
    server: local
    tool: greet
    retry: {attempts: 0}
    with:
      name: "${{ inputs.nmae }}"
      text: "${{ steps.c.text }}"
      bad: "${{ 1 + }}"
      it: "${{ item }}"
  - id: c
    server: local
    tol: upper
    concurrency: 2
    approve: ""
outputs:
  out: "${{ steps.zz.text }}"
`)
	want := []string{
		`2:14: description: expected a string, found a list`,
		`4:16: input name.type: unknown type "strng" (expected string, number, boolean, object or array)`,
		`5:6: env: expected a list of environment variable names, found a string`,
		`7:25: server demo: unknown key "trsut" (did you mean "trust"?)`,
		`11:13: step a: unknown server "dmeo" (did you mean "demo"? declared servers: demo, local)`,
		`13:5: steps[0]: unknown key "wiht" (did you mean "with"?)`,
		`14:9: steps[1].id: duplicate step id "a"`,
		`17:14: steps[1].timeout: expected a positive duration such as 30s or 2m`,
		`21:23: step b.retry.attempts: expected a whole number from 1 to 100 (the total number of attempts), found a number out of range`,
		`23:13: step b.with: expression "inputs.nmae": unknown input "nmae" (did you mean "name"?)`,
		`24:13: step b.with: expression "steps.c.text": step "c" does not run before this one (only earlier steps can be referenced)`,
		`25:12: step b.with: expression "1 +": column 4: Syntax error: mismatched input '<EOF>'`,
		`26:11: step b.with: expression "item": item and index exist only in the with: of a step that has for_each`,
		`29:5: steps[3]: unknown key "tol" (did you mean "tool"?)`,
		`30:18: step c.concurrency: only a step with for_each runs calls concurrently`,
		`31:14: step c.approve: the message for the approver is empty (write approve: true for none)`,
		`33:8: output out: expression "steps.zz.text": unknown step "zz"`,
	}
	var b strings.Builder
	for _, w := range want {
		fmt.Fprintf(&b, "mcpflow: %s:%s\n", file, w)
	}
	r := c.run("validate", file)
	if r.code != exitUsage || r.stdout != "" || r.stderr != b.String() {
		t.Errorf("validate: exit %d, want %d\n--- stdout\n%s--- stderr\n%s--- want stderr\n%s", r.code, exitUsage, r.stdout, r.stderr, b.String())
	}

	r = c.run("validate", "-o", "json", file)
	var doc struct {
		Valid  bool `json:"valid"`
		Errors []struct {
			File         string
			Line, Column int
			Message      string
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != exitUsage || doc.Valid {
		t.Fatalf("validate -o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	var got []string
	for _, e := range doc.Errors {
		if e.File != file {
			t.Errorf("error in %s, want %s", e.File, file)
		}
		got = append(got, fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("validate -o json errors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestValidateDiscoverNamesTheToolMeant: with --discover, an unknown tool
// says which one was likely meant, at the step's tool:, in the same sorted
// list as the file's own errors.
func TestValidateDiscoverNamesTheToolMeant(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	file := c.workflow("tools.yaml", `name: tools
servers: {demo: {builtin: demo}}
steps:
  - id: a
    server: demo
    tool: uper
    with: {text: x}
  - id: b
    server: demo
    tool: greet
    with: {name: 7}
  - id: c
    server: demo
    tool: greet
    wiht: {name: x}
`)
	r := c.run("validate", "--discover", file)
	want := []string{
		`mcpflow: ` + file + `:6:11: step a: unknown tool "uper" on server "demo" (did you mean "upper"? it has: `,
		`mcpflow: ` + file + `:11:18: step b: tool greet: argument name: `,
		`mcpflow: ` + file + `:15:5: steps[2]: unknown key "wiht" (did you mean "with"?)`,
	}
	got := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	ok := r.code == exitUsage && len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(got[i], want[i])
	}
	if !ok {
		t.Errorf("validate --discover: exit %d, want %d\n%s--- want lines starting\n%s", r.code, exitUsage, r.stderr, strings.Join(want, "\n"))
	}
}

// TestValidateDiscoverChecksReads: with --discover, a literal resource URI
// must be one the server lists or one of its templates', and a prompt must
// exist and be given its required arguments and no others; each miss
// names what exists and the closest, at its line and column. A URI with
// an expression is known only when the run gets there.
func TestValidateDiscoverChecksReads(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	file := c.workflow("reads.yaml", `name: reads
inputs:
  who: {default: Ada}
servers: {demo: {builtin: demo}}
steps:
  - {id: notes, server: demo, resource: "file:///demo/note.txt"}
  - {id: hello, server: demo, resource: "demo://greeting/Ada"}
  - {id: later, server: demo, resource: "file:///${{ inputs.who }}"}
  - {id: ask, server: demo, prompt: reviw, with: {text: x}}
  - {id: bare, server: demo, prompt: review}
  - {id: extra, server: demo, prompt: review, with: {text: x, fokus: tone}}
  - {id: good, server: demo, prompt: review, with: {text: x, focus: tone}}
`)
	r := c.run("validate", "--discover", file)
	want := []string{
		`mcpflow: ` + file + `:6:41: step notes: unknown resource "file:///demo/note.txt" on server "demo" (did you mean "file:///demo/notes.txt"? it has: file:///demo/logo.bin, file:///demo/notes.txt, demo://greeting/{name})`,
		`mcpflow: ` + file + `:9:37: step ask: unknown prompt "reviw" on server "demo" (did you mean "review"? it has: review)`,
		`mcpflow: ` + file + `:10:38: step bare: prompt review: argument text: missing (required)`,
		`mcpflow: ` + file + `:11:70: step extra: prompt review: argument fokus: not an argument of the prompt (did you mean "focus"?)`,
	}
	if got := strings.TrimSuffix(r.stderr, "\n"); r.code != exitUsage || got != strings.Join(want, "\n") {
		t.Errorf("validate --discover: exit %d, want %d\n%s\n--- want\n%s", r.code, exitUsage, got, strings.Join(want, "\n"))
	}
	ok := c.workflow("ok.yaml", `name: ok
servers: {demo: {builtin: demo}}
steps:
  - {id: notes, resource: {server: demo, uri: "file:///demo/notes.txt"}}
  - {id: ask, server: demo, prompt: review, with: {text: "${{ steps.notes.text }}"}}
`)
	if r := c.run("validate", "--discover", ok); r.code != 0 {
		t.Errorf("validate --discover ok.yaml: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
