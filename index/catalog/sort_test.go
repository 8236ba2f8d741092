package catalog

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// SortByID orders tools as comparing their IDs does, servers that are
// prefixes of one another and names with underscores included.
func TestSortByID(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	parts := []string{"a", "ab", "a_b", "_", "b", "z", "a__"}
	var tools []Tool
	for range 500 {
		tools = append(tools, Tool{Server: parts[r.IntN(4)] + parts[r.IntN(len(parts))], Name: parts[r.IntN(len(parts))] + parts[r.IntN(len(parts))]})
	}
	want := slices.Clone(tools)
	slices.SortStableFunc(want, func(a, b Tool) int { return strings.Compare(a.ID(), b.ID()) })
	SortByID(tools)
	for i := range tools {
		if tools[i].ID() != want[i].ID() {
			t.Fatalf("position %d: %s, want %s", i, tools[i].ID(), want[i].ID())
		}
	}
}

// CompareID agrees with comparing the IDs, for servers that are prefixes of
// one another followed by characters on either side of '_' ('0' and 'a').
func TestCompareID(t *testing.T) {
	parts := []string{"", "a", "a0", "a_", "a_0", "aa", "A", "_", "é", "a__"}
	sign := func(c int) int { return min(max(c, -1), 1) }
	n := 0
	for _, s1 := range parts[1:] {
		for _, s2 := range parts[1:] {
			for _, n1 := range parts[1:] {
				for _, n2 := range parts[1:] {
					a, b := Tool{Server: s1, Name: n1}, Tool{Server: s2, Name: n2}
					if got, want := sign(CompareID(&a, &b)), sign(strings.Compare(a.ID(), b.ID())); got != want {
						t.Fatalf("CompareID(%s, %s) = %d, want %d", a.ID(), b.ID(), got, want)
					}
					n++
				}
			}
		}
	}
	if n != 9*9*9*9 {
		t.Fatalf("compared %d pairs", n)
	}
}
