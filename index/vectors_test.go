package index

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Scan splits large catalogs among goroutines; the split must not show in
// the result, which equals Nearest's top k and the row-order sum.
func TestScanSplitMatchesNearest(t *testing.T) {
	n := 3*scanChunk + 17
	ix, q := scanIndex(n)
	for i := range 400 { // equal rows: ties across chunk boundaries
		copy(ix.vecs[(n-1-i)*ix.dim:(n-i)*ix.dim], ix.vecs[i*ix.dim:(i+1)*ix.dim])
	}
	for _, server := range []string{"", "server07"} {
		for _, k := range []int{1, 100, n} {
			t.Run(fmt.Sprintf("server=%q/k=%d", server, k), func(t *testing.T) {
				all := ix.Nearest(q, n, server)
				var sum float64
				for i := range ix.tools {
					if server == "" || ix.tools[i].Server == server {
						sum += float64(dot(ix.vecs[i*ix.dim:(i+1)*ix.dim], q))
					}
				}
				want := VectorScan{Top: all[:min(k, len(all))], Sum: sum, N: len(all)}
				if d := cmp.Diff(want, ix.Scan(q, k, server)); d != "" {
					t.Errorf("(-nearest +scan):\n%s", d)
				}
			})
		}
	}
}

// The assembly kernel rounds exactly like dot, on ordinary values and on
// zeros, subnormals and large magnitudes.
func TestDotRows4MatchesDot(t *testing.T) {
	for _, dim := range []int{4, 8, 384} {
		ix, q := scanIndex(64)
		rows := make([]float32, 64*dim)
		for i := range rows {
			rows[i] = ix.vecs[i%len(ix.vecs)] * float32(1+i%7)
		}
		q = append(q, q...)[:dim]
		special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-39, 3e38, -2e38, 1e-20, 1}
		for i, v := range special {
			rows[(i*13)%len(rows)] = v
			q[(i*5)%dim] = v
		}
		for r := 0; r+4 <= 64; r += 4 {
			var out [4]float32
			dotRows4(rows[r*dim:(r+4)*dim], dim, q, &out)
			for j := range 4 {
				want := dot(rows[(r+j)*dim:(r+j+1)*dim], q)
				if math.Float32bits(out[j]) != math.Float32bits(want) && !(want != want && out[j] != out[j]) {
					t.Fatalf("dim %d row %d: dotRows4 %v (%#x), dot %v (%#x)", dim, r+j, out[j], math.Float32bits(out[j]), want, math.Float32bits(want))
				}
			}
		}
	}
}
