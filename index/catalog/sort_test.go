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
