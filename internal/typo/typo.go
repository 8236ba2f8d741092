// Package typo owns how toolgate tells which known name a misspelt one
// meant: the edit distance between two names, and the one known name close
// enough to a typo to suggest ("did you mean"). The config's keys, the
// tool IDs of execute_tool's "Closest names" and the commands' flags all
// measure with it.
package typo

import (
	"math"
	"strings"
)

// Distance is the optimal-string-alignment distance between a and b, by
// rune: insertions, deletions, substitutions and swaps of neighbours
// ("mdoe" → "mode") cost 1 each. Case counts; lower both to ignore it.
// It costs len(a)·len(b) steps: bound what a caller sends before
// measuring it against many names.
func Distance(a, b string) int {
	if ascii(a) && ascii(b) {
		return osa([]byte(a), []byte(b)) // tool IDs and keys mostly: no decoding
	}
	return osa([]rune(a), []rune(b))
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// osa fills the table a row at a time, keeping three: the one before the
// last (for swaps), the last, and the one being filled.
func osa[E byte | rune](a, b []E) int {
	pp := make([]int, 3*(len(b)+1))
	prev, cur := pp[len(b)+1:2*(len(b)+1)], pp[2*(len(b)+1):]
	pp = pp[:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i, ai := range a {
		// Row i+1, for a[:i+1]: left is its last cell filled, diag and
		// up the cells of the row before at j and j+1.
		cur[0] = i + 1
		left, diag := i+1, prev[0]
		var before E // b[j-1]
		for j, bj := range b {
			up := prev[j+1]
			d := diag // a match: never more than the other ways
			if ai != bj {
				d = min(diag, up, left) + 1
				if i > 0 && j > 0 && ai == before && a[i-1] == bj {
					d = min(d, pp[j-1]+1)
				}
			}
			cur[j+1] = d
			left, diag, before = d, up, bj
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(b)]
}

// Suggest returns the known name closest to k, if it is close enough to be
// a likely typo of it: the same letters in another case, or an edit
// distance (case aside) of at most a third of the shorter name's length,
// and at least 1.
func Suggest(k string, known []string) (string, bool) {
	best, bestD := "", math.MaxInt
	for _, c := range known {
		if strings.EqualFold(c, k) {
			return c, true
		}
		if d := Distance(strings.ToLower(k), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(1, min(len(best), len(k))/3)
	return best, best != "" && bestD <= limit
}
