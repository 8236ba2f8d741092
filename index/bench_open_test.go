package index

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
)

// Benchmarks (no timed assertions):
//
//	go test ./index -run '^$' -bench . -benchtime 20x

func buildOnDisk(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	emb := &fakeEmbedder{id: "fake/384", dim: 384}
	ix, _, err := Ensure(context.Background(), dir, syntheticTools(n), emb, &Options{BatchSize: 256})
	if err != nil {
		b.Fatal(err)
	}
	ix.Close()
	return dir
}

// BenchmarkOpen is the warm start: manifest, catalog snapshot, opened
// vectors and the Bleve index of an up-to-date generation.
func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			dir := buildOnDisk(b, n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ix, err := Open(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				ix.Close()
			}
		})
	}
}

// BenchmarkEnsureUpToDate adds the catalog fingerprint check to Open.
func BenchmarkEnsureUpToDate(b *testing.B) {
	dir := buildOnDisk(b, 10000)
	tools := syntheticTools(10000)
	emb := &fakeEmbedder{id: "fake/384", dim: 384}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ix, st, err := Ensure(context.Background(), dir, tools, emb, nil)
		if err != nil || st != StateUpToDate {
			b.Fatal(st, err)
		}
		ix.Close()
	}
}

// BenchmarkKeyword at k=10 and at k=all (what search's fusion asks for).
func BenchmarkKeyword(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		ix, err := Build(context.Background(), syntheticTools(n), nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range []int{10, n} {
			b.Run(fmt.Sprintf("tools=%d/k=%d", n, k), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := ix.Keyword("list the files of a user in a bucket", k, ""); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		ix.Close()
	}
}

func BenchmarkNearest(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		ix := withIDs(&Index{tools: syntheticTools(n), dim: 384, vecs: make([]float32, n*384)})
		for i := range ix.vecs {
			ix.vecs[i] = float32(i%97) / 97
		}
		q := fakeVector("list files", 384)
		// k = all is the whole ranking (the reference the pruned search
		// is held to).
		for _, k := range []struct {
			name string
			k    int
		}{{"", 10}, {"/k=all", n}} {
			b.Run(fmt.Sprintf("tools=%d%s", n, k.name), func(b *testing.B) {
				for b.Loop() {
					ix.Nearest(q, k.k, "")
				}
			})
		}
	}
}

// azureLike replicates the azure-mcp bench tools (real, 1–5 KB schemas;
// $TOOLGATE_BENCH_DIR, else the shared/ folder beside the clone) over as
// many servers as it takes to reach n tools.
func azureLike(b *testing.B, n int) []catalog.Tool {
	dir := os.Getenv("TOOLGATE_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "bench")
	}
	tools, err := catalog.ReadFile(filepath.Join(dir, "azure-mcp", "tools.jsonl"))
	if err != nil {
		testenv.Missing(b, "bench split azure-mcp not available (set TOOLGATE_BENCH_DIR): %v", err)
	}
	out := make([]catalog.Tool, 0, n)
	for s := 0; len(out) < n; s++ {
		for _, t := range tools {
			if len(out) == n {
				break
			}
			t.Server = fmt.Sprintf("azure%d", s)
			out = append(out, t)
		}
	}
	return out
}

// BenchmarkOpenRealSchemas is BenchmarkOpen with real-sized schemas.
func BenchmarkOpenRealSchemas(b *testing.B) {
	dir := b.TempDir()
	tools := azureLike(b, 10000)
	ix, _, err := Ensure(context.Background(), dir, tools, &fakeEmbedder{id: "fake/384", dim: 384}, &Options{BatchSize: 256})
	if err != nil {
		b.Fatal(err)
	}
	ix.Close()
	b.Run("Open", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			ix, err := Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			ix.Close()
		}
	})
	b.Run("Fingerprint", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			catalog.Fingerprint(tools)
		}
	})
}
