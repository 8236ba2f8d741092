package search

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/indextest"
)

// seededEmbedder gives each text a pseudo-random unit vector of its own.
type seededEmbedder struct{}

func (seededEmbedder) ModelID() string { return "test/seeded" }
func (seededEmbedder) Dim() int        { return 64 }
func (seededEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		h := fnv.New64a()
		h.Write([]byte(t))
		x := h.Sum64() | 1
		v := make([]float64, 64)
		for d := range v {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			v[d] = float64(int64(x%2001)-1000) / 1000
		}
		normalise64(v)
		out[i] = to32(v)
	}
	return out, nil
}

// fitAdapter sums XᵀX and XᵀY a chunk at a time, without X and Y: it fits
// the very map the regression on X and Y whole did (fitAdapterWhole, the
// code it replaced), over more queries and tools than one chunk, more
// queries than learnAdapterMax, queries shared by tools, and weights that
// are not 1.
func TestAdapterSumsMatchWholeRegression(t *testing.T) {
	tools := indextest.Catalog(300, indextest.Seed)
	emb := seededEmbedder{}
	ix, err := index.Build(context.Background(), tools, emb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	byTool := map[string]*toolPairs{}
	var texts []string
	for i := range 6000 { // more queries than the adapter keeps
		id := tools[i%len(tools)].ID()
		q := fmt.Sprintf("query %d", i%5000) // 1,000 of them lead to two tools
		w := 0.1 + float64(i%7)/7
		tp := byTool[id]
		if tp == nil {
			tp = &toolPairs{}
			byTool[id] = tp
		}
		tp.queries, tp.weights, tp.n = append(tp.queries, q), append(tp.weights, w), tp.n+w
		if i < 5000 {
			texts = append(texts, q)
		}
	}
	vecs, _ := emb.Embed(context.Background(), texts)
	qv := map[string][]float32{}
	for i, q := range texts {
		qv[q] = vecs[i]
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range byTool {
			if !yield(id) {
				return
			}
		}
	})
	got, want := fitAdapter(ix, ids, byTool, qv), fitAdapterWhole(ix, ids, byTool, qv)
	if len(got) != len(want) || len(got) != emb.Dim() {
		t.Fatalf("adapter of %d rows, want %d", len(got), len(want))
	}
	var worst float64
	for e := range got {
		for d := range got[e] {
			worst = max(worst, math.Abs(float64(got[e][d]-want[e][d])))
		}
	}
	if worst > 1e-5 {
		t.Errorf("adapters differ by up to %g", worst)
	}
}

// fitAdapterWhole is fitAdapter as it was: the regression on X and Y
// built whole (queries × dim each), the reference of the sums.
func fitAdapterWhole(ix *index.Index, ids []string, byTool map[string]*toolPairs, qv map[string][]float32) [][]float32 {
	dim := ix.Dim()
	type row struct {
		query string
		w     float64   // the query's pairs' total weight
		y     []float64 // their tools' vectors, weighted and summed
	}
	rows := map[string]*row{}
	for _, id := range ids {
		tv, _ := ix.Vector(id)
		tp := byTool[id]
		for i, q := range tp.queries {
			r := rows[q]
			if r == nil {
				r = &row{query: q, y: make([]float64, dim)}
				rows[q] = r
			}
			w := tp.weights[i]
			r.w += w
			for d, x := range tv {
				r.y[d] += w * float64(x)
			}
		}
	}
	list := make([]*row, 0, len(rows))
	for _, r := range rows {
		list = append(list, r)
	}
	slices.SortFunc(list, func(a, b *row) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return strings.Compare(a.query, b.query)
	})
	list = list[:min(len(list), learnAdapterMax)]

	// With X's rows √w·q and Y's y/√w: XᵀX = Σ w·q·qᵀ and XᵀY = Σ q·yᵀ.
	x := mat.NewDense(len(list), dim, nil)
	y := mat.NewDense(len(list), dim, nil)
	var total float64
	for k, r := range list {
		sw := math.Sqrt(r.w)
		for d, v := range qv[r.query] {
			x.Set(k, d, sw*float64(v))
		}
		for d, v := range r.y {
			y.Set(k, d, v/sw)
		}
		total += r.w
	}
	var a mat.SymDense
	a.SymOuterK(1, x.T())
	var b mat.Dense
	b.Mul(x.T(), y)
	return solveAdapter(&a, &b, total)
}
