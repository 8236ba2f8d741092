package embed

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// catalogTexts are the texts index.Build embeds for the first n tools of
// the synthetic benchmark catalog (about 28 tokens each).
func catalogTexts(n int) []string {
	var out []string
	for _, t := range indextest.Catalog(n, indextest.Seed) {
		out = append(out, catalog.DocumentText(t))
	}
	return out
}

// BenchmarkEmbedCatalog is cold indexing's inner loop: one Embed call of
// call texts at a time over 512 catalog texts, by session layout and model
// batch size (texts/s is the figure):
//
//	go test ./embed -run '^$' -bench EmbedCatalog -benchtime 2x
func BenchmarkEmbedCatalog(b *testing.B) {
	texts := catalogTexts(512)
	for _, c := range []struct{ sessions, threads, batch, call int }{
		{2, 2, 8, 256}, {2, 1, 8, 256}, {2, 1, 4, 256}, {2, 1, 16, 256}, {2, 1, 32, 256}, {2, 1, 8, 1024}, {1, 2, 8, 256},
	} {
		b.Run(fmt.Sprintf("sessions%d/threads%d/batch%d/call%d", c.sessions, c.threads, c.batch, c.call), func(b *testing.B) {
			e, err := New(installed(Options{Sessions: c.sessions, Threads: c.threads, BatchSize: c.batch}))
			testenv.Require(b, err)
			defer e.Close()
			ctx := context.Background()
			for b.Loop() {
				for i := 0; i < len(texts); i += c.call {
					if _, err := e.Embed(ctx, texts[i:min(i+c.call, len(texts))]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*len(texts))/b.Elapsed().Seconds(), "texts/s")
		})
	}
}

// BenchmarkEmbedQuery is search_tools' query embedding: one short text per
// call, by session layout (latency per op is the figure).
func BenchmarkEmbedQuery(b *testing.B) {
	for _, c := range []struct{ sessions, threads int }{{2, 1}, {1, 2}, {2, 2}} {
		b.Run(fmt.Sprintf("sessions%d/threads%d", c.sessions, c.threads), func(b *testing.B) {
			e, err := New(installed(Options{Sessions: c.sessions, Threads: c.threads}))
			testenv.Require(b, err)
			defer e.Close()
			qs := indextest.Queries(indextest.Catalog(1000, indextest.Seed), 64, indextest.Seed)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				if _, err := e.Embed(ctx, []string{qs[i%len(qs)].Text}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
