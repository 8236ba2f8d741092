package index

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Nearest for the whole catalog (scoreAll) ranks exactly like the heap path.
func TestNearestAllMatchesHeap(t *testing.T) {
	n := 300
	ix := withIDs(&Index{tools: syntheticTools(n), dim: 8, vecs: make([]float32, n*8)})
	for i := range ix.vecs {
		ix.vecs[i] = float32((i*7919)%13) / 13 // many equal dot products
	}
	q := []float32{1, 0.5, 0, 0.25, 1, 0, 0.5, 1}
	for _, server := range []string{"", "server07"} {
		t.Run(fmt.Sprintf("server=%q", server), func(t *testing.T) {
			all := ix.Nearest(q, n, server)
			heapPath := ix.Nearest(q, n-1, server)
			if len(heapPath) < len(all)-1 {
				t.Fatalf("heap path %d hits, all %d", len(heapPath), len(all))
			}
			if d := cmp.Diff(all[:len(heapPath)], heapPath); d != "" {
				t.Errorf("k=all vs heap (-all +heap):\n%s", d)
			}
		})
	}
}

// withIDs gives an Index made field by field in a test the ID table
// Build and Open make.
func withIDs(ix *Index) *Index {
	ix.ids, ix.byID, _ = idTable(ix.tools)
	return ix
}
