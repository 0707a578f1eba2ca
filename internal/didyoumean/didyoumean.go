// Package didyoumean finds the likely intended word for a typo, for error
// messages such as `unknown key "wiht" (did you mean "with"?)`.
package didyoumean

import "strings"

// Closest returns the word of candidates closest to s (case-insensitively,
// by edit distance), or "" when none is close enough to be a likely typo:
// at most two edits, and fewer than half of s. Ties go to the word that
// sorts first, so the answer does not depend on the order of candidates.
func Closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := distance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD || (d == bestD && best != "" && c < best) {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > len(s)/2 {
		return ""
	}
	return best
}

// distance is the Levenshtein edit distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
