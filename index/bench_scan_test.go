package index

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/blevesearch/bleve/v2/search/searcher"
)

// scanIndex is n tools with random unit-ish 384-dimensional vectors (no
// Bleve): enough to time the vector scan alone.
func scanIndex(n int) (*Index, []float32) {
	const dim = 384
	r := rand.New(rand.NewPCG(1, 2))
	ix := withIDs(&Index{tools: syntheticTools(n), dim: dim, vecs: make([]float32, n*dim)})
	for i := range ix.vecs {
		ix.vecs[i] = float32(r.NormFloat64() / 20)
	}
	q := make([]float32, dim)
	for i := range q {
		q[i] = float32(r.NormFloat64() / 20)
	}
	return ix, q
}

// BenchmarkScan is the vector half of one hybrid query: score every row,
// keep the top 100 and the sum; -file with the rows read from a file, as
// an index opened from disk reads them (the rows rescored, one pread each).
//
//	go test ./index -run '^$' -bench Scan -count 5
func BenchmarkScan(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		mem, q := scanIndex(n)
		for _, src := range []struct {
			name string
			ix   *Index
		}{{"", mem}, {"-file", onFile(b, mem)}} {
			src.ix.PrepareScan()
			b.Run(fmt.Sprintf("tools=%d%s", n, src.name), func(b *testing.B) {
				b.SetBytes(int64(n * src.ix.dim * 4))
				for b.Loop() {
					src.ix.Scan(q, 100, "")
				}
			})
		}
	}
}

// BenchmarkDot is the kernel alone on one 384-dimensional row.
func BenchmarkDot(b *testing.B) {
	ix, q := scanIndex(1)
	var s float32
	for b.Loop() {
		s += dot(ix.vecs, q)
	}
	_ = s
}

// BenchmarkDotRows4 is the four-row kernel Scan uses, per four rows.
func BenchmarkDotRows4(b *testing.B) {
	ix, q := scanIndex(4)
	var out [4]float32
	for b.Loop() {
		dotRows4(ix.vecs, 384, q, &out)
	}
}

// BenchmarkKeywordTakeover compares Bleve's disjunction searchers on a
// short and a long query over 10,000 tools: the slice searcher this
// package selects (scores independent of the search path) against the heap
// searcher Bleve uses past 10 clauses by default.
func BenchmarkKeywordTakeover(b *testing.B) {
	ix, err := Build(context.Background(), syntheticTools(10000), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	queries := map[string]string{
		"short": "create an issue in the repository",
		"long": "list get create delete update search read write send query file issue user message record " +
			"bucket table event invoice page image repository workspace owner timestamps maximum results id",
	}
	defer func(v int) { searcher.DisjunctionHeapTakeover = v }(searcher.DisjunctionHeapTakeover)
	for _, name := range []string{"short", "long"} {
		for _, tc := range []struct {
			name     string
			takeover int
		}{{"slice", math.MaxInt}, {"heap", 10}} {
			b.Run(name+"/"+tc.name, func(b *testing.B) {
				searcher.DisjunctionHeapTakeover = tc.takeover
				for b.Loop() {
					if _, err := ix.Keyword(queries[name], 100, ""); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDotRows4I8 is Scan's first-pass kernel, per four rows.
func BenchmarkDotRows4I8(b *testing.B) {
	ix, q := scanIndex(4)
	st := newVectorCopy(ix)
	q16, _ := quantizeQuery(q)
	var out [4]int32
	for b.Loop() {
		dotRows4I8(st.q8, 384, q16, &out)
	}
}

// BenchmarkVectorSums and BenchmarkVectorCopy are what Scan needs besides
// the vectors: the server sums (the first Scan makes them) and the 8-bit
// copy (PrepareScan makes it, in the background when an engine gets the
// index); -file with the rows streamed from a file (in the page cache).
func BenchmarkVectorSums(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		mem, _ := scanIndex(n)
		for _, src := range []struct {
			name string
			ix   *Index
		}{{"", mem}, {"-file", onFile(b, mem)}} {
			b.Run(fmt.Sprintf("tools=%d%s", n, src.name), func(b *testing.B) {
				for b.Loop() {
					newVectorSums(src.ix)
				}
			})
		}
	}
}

func BenchmarkVectorCopy(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		mem, _ := scanIndex(n)
		for _, src := range []struct {
			name string
			ix   *Index
		}{{"", mem}, {"-file", onFile(b, mem)}} {
			b.Run(fmt.Sprintf("tools=%d%s", n, src.name), func(b *testing.B) {
				for b.Loop() {
					newVectorCopy(src.ix)
				}
			})
		}
	}
}
