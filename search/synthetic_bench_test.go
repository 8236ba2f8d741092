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
func BenchmarkSearchModel(b *testing.B) {
	model, err := installedEmbedder()
	testenv.Require(b, err)
	defer model.Close()
	for _, n := range []int{10000, 50000} {
		tools := indextest.Catalog(n, indextest.Seed)
		e := search.New(build(b, tools, &hashEmbedder{}), model, nil)
		qs := indextest.Queries(tools, 200, indextest.Seed)
		b.Run(fmt.Sprintf("tools=%d/hybrid", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := e.Search(context.Background(), search.Query{Text: qs[i%len(qs)].Text}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		e.Close()
	}
}
