package didyoumean

import "testing"

func TestClosest(t *testing.T) {
	keys := []string{"id", "name", "server", "tool", "with", "if", "for_each", "retry", "timeout"}
	for _, tc := range []struct{ in, want string }{
		{"wiht", "with"},
		{"retrys", "retry"},
		{"Tool", "tool"},
		{"servr", "server"},
		{"timeuot", "timeout"},
		{"x", ""},        // one letter is nobody's typo
		{"database", ""}, // too far from everything
		{"forEach", "for_each"},
		{"", ""},
	} {
		if got := Closest(tc.in, keys); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Closest("ab", []string{"ac", "ab"}); got != "ab" {
		t.Errorf("exact match lost: %q", got)
	}
	if a, b := Closest("tst", []string{"tsa", "tsb"}), Closest("tst", []string{"tsb", "tsa"}); a != b {
		t.Errorf("order-dependent: %q vs %q", a, b)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"with", "wiht", 2}, {"same", "same", 0}} {
		if got := distance(tc.a, tc.b); got != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
