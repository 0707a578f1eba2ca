package workflow_test

import (
	"flag"
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
