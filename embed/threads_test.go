package embed

import (
	"context"
	"math"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// The intra-op thread count changes how fast a text is embedded, never its
// vector: ONNX Runtime splits the work without splitting any sum, so the
// vectors are bit-identical (the cache and the ranking rely on that when
// the default thread count changes).
func TestThreadsSameVectors(t *testing.T) {
	ctx := context.Background()
	var got [][][]float32
	for _, threads := range []int{1, 2} {
		e, err := New(installed(Options{Sessions: 1, Threads: threads}))
		testenv.Require(t, err)
		var vecs [][]float32
		for _, text := range benchTexts(12) {
			v, err := e.Embed(ctx, []string{text})
			if err != nil {
				t.Fatal(err)
			}
			vecs = append(vecs, v[0])
		}
		batch, err := e.Embed(ctx, benchTexts(12))
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		got = append(got, append(vecs, batch...))
	}
	for i := range got[0] {
		for k := range got[0][i] {
			if math.Float32bits(got[0][i][k]) != math.Float32bits(got[1][i][k]) {
				t.Fatalf("vector %d differs at %d: 1 thread %v, 2 threads %v", i, k, got[0][i][k], got[1][i][k])
			}
		}
	}
}
