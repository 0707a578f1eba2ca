package jsonpos

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStripJSONCKeepsPositions(t *testing.T) {
	src := "{ // comment \"with quote\n  \"a\": \"http://x//y\", /* c */ \"b\": [1,2,],\n}"
	out := StripJSONC([]byte(src))
	if len(out) != len(src) || strings.Count(string(out), "\n") != strings.Count(src, "\n") {
		t.Fatalf("stripJSONC changed offsets: %q", out)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if v["a"] != "http://x//y" {
		t.Errorf("a string with // was changed: %v", v["a"])
	}
}

func TestLineCol(t *testing.T) {
	src := []byte("ab\ncé\nx")
	for off, want := range map[int][2]int{0: {1, 1}, 2: {1, 3}, 3: {2, 1}, 6: {2, 3}, 7: {3, 1}, 99: {3, 2}} {
		if l, c := LineCol(src, off); l != want[0] || c != want[1] {
			t.Errorf("LineCol(%d) = %d:%d, want %d:%d", off, l, c, want[0], want[1])
		}
	}
}
