package search_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/index/indextest"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// BenchmarkSearchSynthetic is the ranker's own cost per query on the
// benchmark catalogs (index/indextest) at 10,000 and 50,000 tools, per mode,
// with the hash stand-in embedding the query (so no model run): hybrid
// minus the larger of bm25 and vector is roughly the cost of fusion.
//
//	go test ./search -run '^$' -bench SearchSynthetic -benchtime 200x
func BenchmarkSearchSynthetic(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		emb := &hashEmbedder{}
		tools := indextest.Catalog(n, indextest.Seed)
		e := search.New(build(b, tools, emb), emb, nil)
		qs := indextest.Queries(tools, 100, indextest.Seed)
		for _, mode := range search.Modes {
			b.Run(fmt.Sprintf("tools=%d/%s", n, mode), func(b *testing.B) {
				i := 0
				for b.Loop() {
					if _, err := e.Search(context.Background(), search.Query{Text: qs[i%len(qs)].Text, Mode: mode}); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
		e.Close()
	}
}

// BenchmarkSearchModel is hybrid search_tools as served, minus MCP: the
// query embedded by the real MiniLM (uncached, default sessions and
// threads) while the catalog's vectors are the hash stand-in's (the cost
// does not depend on their values). Profile it to see what bounds a search:
//
//	go test ./search -run '^$' -bench SearchModel -benchtime 200x -cpuprofile cpu.prof
//
// The long/… runs ask three of those queries as one ("…, then … and …"):
// long/steps as served, which embeds the three parts beside the whole
// query and ranks each (steps.go); long/parts with the steps off
// (StepWeight −1): with the stand-in's vectors nothing fits, so it embeds
// the parts for the confidence (parts.go), as a real search does when the
// whole query leaves every hit short of minConfidence; long/whole with both
// off (minConfidence −1 too). The differences are what each costs.
func BenchmarkSearchModel(b *testing.B) {
	model, err := installedEmbedder()
	testenv.Require(b, err)
	defer model.Close()
	loop := func(b *testing.B, e *search.Engine, qs []string) {
		i := 0
		for b.Loop() {
			if _, err := e.Search(context.Background(), search.Query{Text: qs[i%len(qs)]}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	for _, n := range []int{10000, 50000} {
		tools := indextest.Catalog(n, indextest.Seed)
		e := search.New(build(b, tools, &hashEmbedder{}), model, nil)
		qs := indextest.Queries(tools, 600, indextest.Seed)
		short := make([]string, 200)
		long := make([]string, 200)
		for i := range short {
			short[i] = qs[i].Text
			long[i] = qs[200+2*i].Text + ", then " + qs[201+2*i].Text + " and " + qs[i].Text
		}
		b.Run(fmt.Sprintf("tools=%d/hybrid", n), func(b *testing.B) { loop(b, e, short) })
		if n == 10000 {
			b.Run(fmt.Sprintf("tools=%d/long/steps", n), func(b *testing.B) { loop(b, e, long) })
			parts := search.New(build(b, tools, &hashEmbedder{}), model, &search.Options{StepWeight: -1})
			b.Run(fmt.Sprintf("tools=%d/long/parts", n), func(b *testing.B) { loop(b, parts, long) })
			parts.Close()
			whole := search.New(build(b, tools, &hashEmbedder{}), model, &search.Options{StepWeight: -1, MinConfidence: -1})
			b.Run(fmt.Sprintf("tools=%d/long/whole", n), func(b *testing.B) { loop(b, whole, long) })
			whole.Close()
		}
		e.Close()
	}
}

// BenchmarkSearchLearned is hybrid ranking at 10,000 tools (hash stand-in
// for the query, as BenchmarkSearchSynthetic) with no learned pairs and
// with learned pairs for 500 and for 5,000 tools (4 queries each): what
// learning adds to a search. The learned model is built before timing, as
// serve builds it off the search path.
//
//	go test ./search -run '^$' -bench SearchLearned -benchtime 300x
func BenchmarkSearchLearned(b *testing.B) {
	const n = 10000
	emb := &hashEmbedder{}
	tools := indextest.Catalog(n, indextest.Seed)
	ix := build(b, tools, emb)
	ix.PrepareScan() // the 8-bit copy a served index makes in the background
	qs := indextest.Queries(tools, 400, indextest.Seed)
	for _, learned := range []int{0, 500, 5000} {
		var usage staticUsage
		for i := range learned {
			t := tools[(i*7919)%n]
			for j := range 4 {
				usage = append(usage, search.UsagePair{Query: fmt.Sprintf("%s %s %d", t.Name, qs[(i+j)%len(qs)].Text, j), Tool: t.ID(), Weight: 1})
			}
		}
		e := search.New(ix, emb, &search.Options{Usage: usage})
		if err := e.RefreshLearned(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("tools=%d/learned=%d", n, learned), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := e.Search(context.Background(), search.Query{Text: qs[i%len(qs)].Text}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		// The engine owns ix: the last one closes it.
		if learned == 5000 {
			e.Close()
		}
	}
}

// BenchmarkRefreshLearned is the cost of building the learned model off the
// search path (blended vectors, the learned field, the query adapter) at
// 10,000 tools, four queries a learned tool; the queries' vectors come from
// a cheap embedder, as the cache gives them.
func BenchmarkRefreshLearned(b *testing.B) {
	const n = 10000
	emb := &hashEmbedder{}
	tools := indextest.Catalog(n, indextest.Seed)
	qs := indextest.Queries(tools, 400, indextest.Seed)
	for _, learned := range []int{500, 5000} {
		var usage staticUsage
		for i := range learned {
			t := tools[(i*7919)%n]
			for j := range 4 {
				usage = append(usage, search.UsagePair{Query: fmt.Sprintf("%s %s %d", t.Name, qs[(i+j)%len(qs)].Text, j), Tool: t.ID(), Weight: 1})
			}
		}
		e := search.New(build(b, tools, emb), emb, &search.Options{Usage: usage})
		b.Run(fmt.Sprintf("tools=%d/learned=%d", n, learned), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := e.RefreshLearned(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
		e.Close()
	}
}
