package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestListPages: a list cut at --limit says so on stderr with the cursor
// of its next page; following the cursors visits every invocation once,
// newest first, and the last page says nothing; JSON output and --limit 0
// are never cut.
func TestListPages(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	hello := repoFile("examples", "workflows", "hello.yaml")
	for range 3 {
		if r := c.run("run", hello, "--trust-workspace"); r.code != 0 {
			t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
		}
	}
	ids := func(args ...string) []string {
		r := c.run(append([]string{"journal", "list", "-o", "json"}, args...)...)
		var list []struct{ ID string }
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, r.stderr)
		}
		var out []string
		for _, v := range list {
			out = append(out, v.ID)
		}
		return out
	}
	all := ids("--limit", "0")
	if len(all) != 9 {
		t.Fatalf("%d invocations, want 9", len(all))
	}
	next := regexp.MustCompile(`^showing 4 of (\d) invocations( from the cursor)? — next page: --cursor (\S+); all: --limit 0\n$`)
	var seen []string
	cursor, wantTotal := "", "9"
	for page := 0; ; page++ {
		args := []string{"journal", "list", "--limit", "4"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		r := c.run(args...)
		rows := lines(r.stdout)[1:]
		for _, row := range rows {
			seen = append(seen, strings.Fields(row)[0])
		}
		if page == 2 {
			if len(rows) != 1 || r.stderr != "" {
				t.Errorf("last page: %d rows, stderr %q; want 1 row and no note", len(rows), r.stderr)
			}
			break
		}
		m := next.FindStringSubmatch(r.stderr)
		if m == nil || m[1] != wantTotal || (m[2] != "") != (cursor != "") {
			t.Fatalf("page %d: stderr %q, want the cut noted with %s in all", page, r.stderr, wantTotal)
		}
		cursor, wantTotal = m[3], "5"
	}
	for i, id := range all {
		if i >= len(seen) || !strings.HasPrefix(id, seen[i]) {
			t.Fatalf("pages gave %v, want the prefixes of %v in order", seen, all)
		}
	}
	if r := c.run("journal", "list", "--limit", "4", "-o", "json"); r.stderr != "" {
		t.Errorf("JSON output noted a cut on stderr: %q", r.stderr)
	}
	if got := ids("--limit", "4", "--cursor", all[3]); !slices.Equal(got, all[4:8]) {
		t.Errorf("--cursor %s: %v, want %v", all[3], got, all[4:8])
	}
}
