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

// TestEnd: every value's End is just past its last byte, so that
// src[Off:End] is the value's own text.
func TestEnd(t *testing.T) {
	src := []byte("{ // c\n  \"a\": [1, \"x\", {\"b\": null}],\n  \"c\": true, /* d */ \"e\": -1.5e3,\n}")
	root, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(n *Node)
	walk = func(n *Node) {
		text := string(src[n.Off:n.End])
		var v any
		if err := json.Unmarshal(StripJSONC([]byte(text)), &v); err != nil {
			t.Errorf("src[%d:%d] = %q is not one value: %v", n.Off, n.End, text, err)
		}
		for _, f := range n.Keys {
			walk(f.Val)
		}
		for _, it := range n.Items {
			walk(it)
		}
	}
	walk(root)
	if root.Off != 0 || root.End != len(src) {
		t.Errorf("root spans %d:%d, want 0:%d", root.Off, root.End, len(src))
	}
	if got := Comments(src, 0, len(src)); strings.Join(got, "|") != "// c|/* d */" {
		t.Errorf("Comments = %q", got)
	}
}
