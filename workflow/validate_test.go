package workflow_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/mcpflow/mcpflow/workflow"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestValidationGolden loads each testdata/validate/*.txtar workflow and
// compares the error (empty for a valid workflow) with the golden one.
func TestValidationGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/validate/*.txtar")
	if len(files) < 10 {
		t.Fatalf("only %d cases", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var src []byte
			for _, file := range ar.Files {
				if file.Name == "workflow.yaml" {
					src = file.Data
				}
			}
			got := ""
			if _, err := workflow.Load("workflow.yaml", src, nil); err != nil {
				got = err.Error() + "\n"
			}
			for i := range ar.Files {
				if ar.Files[i].Name != "error" {
					continue
				}
				if *update {
					ar.Files[i].Data = []byte(got)
					if err := os.WriteFile(f, txtar.Format(ar), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				if want := string(ar.Files[i].Data); got != want {
					t.Errorf("got  %q\nwant %q", got, want)
				}
			}
		})
	}
}

// TestLoadReportsEveryError: a file with many errors gets every one of them
// from one Load, sorted by position, each with its line and column, and
// errors.Is and errors.As still see a workflow error.
func TestLoadReportsEveryError(t *testing.T) {
	ar, err := txtar.ParseFile("testdata/validate/every-error.txtar")
	if err != nil {
		t.Fatal(err)
	}
	wf, err := workflow.Load("workflow.yaml", ar.Files[0].Data, nil)
	if wf != nil || !errors.Is(err, workflow.ErrInvalid) {
		t.Fatalf("Load = %v, %v; want no workflow and a workflow error", wf, err)
	}
	var errs workflow.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("%T is not a workflow.Errors", err)
	}
	want := []string{
		"2:14 description", "4:16 input name.type", "5:34 input count.default", "6:6 env",
		"8:25 server demo", "12:13 step a", "14:5 steps[0]", "15:9 steps[1].id",
		"18:14 steps[1].timeout", "22:23 step b.retry.attempts", "24:13 step b.with",
		"25:13 step b.with", "26:12 step b.with", "27:11 step b.with", "30:5 steps[3]",
		"31:18 step c.concurrency", "32:14 step c.approve", "34:8 output out",
	}
	var got []string
	for _, e := range errs {
		what, _, _ := strings.Cut(e.Msg, ": ")
		got = append(got, fmt.Sprintf("%d:%d %s", e.Line, e.Column, what))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors at\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var first *workflow.PosError
	if !errors.As(err, &first) || first != errs[0] {
		t.Errorf("errors.As found %v, want the first error %v", first, errs[0])
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != len(want) || lines[0] != errs[0].Error() {
		t.Errorf("Error() is not one error a line:\n%s", err)
	}
}

// TestJoin: Join sorts by position, then message, and drops repeats.
func TestJoin(t *testing.T) {
	pe := func(line, col int, msg string) *workflow.PosError {
		return &workflow.PosError{File: "w.yaml", Line: line, Column: col, Msg: msg}
	}
	if err := workflow.Join(); err != nil {
		t.Errorf("Join() = %v, want nil", err)
	}
	err := workflow.Join(pe(3, 1, "c"), pe(1, 9, "b"), pe(1, 9, "a"), pe(0, 0, "file"), pe(3, 1, "c"), pe(1, 10, "a"))
	want := "w.yaml: file\nw.yaml:1:9: a\nw.yaml:1:9: b\nw.yaml:1:10: a\nw.yaml:3:1: c"
	if err == nil || err.Error() != want {
		t.Errorf("Join =\n%v\nwant\n%s", err, want)
	}
}
