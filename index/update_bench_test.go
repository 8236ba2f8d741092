package index_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
)

// Benchmarks of updating an index (no embedder: the Bleve half and the
// files are what is measured; vectors are reused either way):
//
//	go test ./index -run '^$' -bench Update -count 5
//
// path=incremental is the update as it runs now; path=full forces the full
// Bleve build the update did before (the fault hook fails the incremental
// path at its first step, so the same code falls back).

var errForceFull = errors.New("benchmark: full build")

func forceFull(b *testing.B, full bool) {
	if full {
		b.Cleanup(index.SetUpdateFault(func(string) error { return errForceFull }))
	}
}

// template builds tools once into a folder that each iteration copies.
func template(b *testing.B, tools []catalog.Tool) string {
	b.Helper()
	dir := b.TempDir()
	ix, _, err := index.Ensure(context.Background(), dir, tools, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ix.Close()
	return dir
}

func copyTree(b *testing.B, src, dst string) {
	b.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return writeSynced(filepath.Join(dst, rel), data)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// writeSynced writes a file to disk, as the generation it copies was: the
// update hard-links segment files and syncs them again, which must not
// measure writing the copy back.
func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// update runs one timed update of a copy of tmpl to tools, and says
// whether it was incremental.
func update(b *testing.B, tmpl string, tools []catalog.Tool) bool {
	b.StopTimer()
	dir := filepath.Join(b.TempDir(), "ix")
	copyTree(b, tmpl, dir)
	b.StartTimer()
	ix, rep, err := index.EnsureReport(context.Background(), dir, tools, nil, nil)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	ix.Close()
	os.RemoveAll(dir)
	b.StartTimer()
	return rep.Incremental
}

// BenchmarkUpdate updates a 10,000-tool index after one tool's description
// changed.
func BenchmarkUpdate(b *testing.B) {
	const n = 10000
	tools := indextest.Catalog(n, indextest.Seed)
	tmpl := template(b, tools)
	next := slices.Clone(tools)
	next[n/2].Description += " Results include archived items."
	for _, full := range []bool{false, true} {
		b.Run(fmt.Sprintf("tools=%d/path=%s", n, pathName(full)), func(b *testing.B) {
			forceFull(b, full)
			for i := 0; i < b.N; i++ {
				if update(b, tmpl, next) == full {
					b.Fatalf("incremental = %v", !full)
				}
			}
		})
	}
}

// BenchmarkUpdateSteady is updates in a row on one index, each changing
// another tool's description. One op is index.MaxSegments updates, the
// cycle after which an incremental index has a full build to compact its
// segments; ns/update is the cost per update including that build.
func BenchmarkUpdateSteady(b *testing.B) {
	const n = 10000
	tools := indextest.Catalog(n, indextest.Seed)
	for _, full := range []bool{false, true} {
		b.Run(fmt.Sprintf("tools=%d/path=%s", n, pathName(full)), func(b *testing.B) {
			forceFull(b, full)
			dir := b.TempDir()
			ix, _, err := index.Ensure(context.Background(), dir, tools, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			ix.Close()
			cur := slices.Clone(tools)
			updates, fulls := 0, 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for range index.MaxSegments {
					cur[(updates*7919)%n].Description += " Changed again."
					ix, rep, err := index.EnsureReport(context.Background(), dir, cur, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					ix.Close()
					updates++
					if !rep.Incremental {
						fulls++
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(updates), "ns/update")
			b.ReportMetric(float64(fulls)/float64(updates), "full/update")
		})
	}
}

// BenchmarkUpdateFraction changes a share of a 10,000-tool catalog's
// descriptions, incrementally (fraction and dead-document limits lifted)
// and in full: where the two cross is where maxUpdateFraction belongs. The
// incremental metric is the share of updates that stayed incremental: at
// 20% the new segment's own dictionary would move Bleve's BM25 average
// name length (8,001 distinct terms in 10,000 names, 10,107 counted over
// the two segments) and the update builds in full instead.
func BenchmarkUpdateFraction(b *testing.B) {
	const n = 10000
	tools := indextest.Catalog(n, indextest.Seed)
	tmpl := template(b, tools)
	for _, pct := range []int{1, 5, 10, 15, 20} {
		next := slices.Clone(tools)
		for i := 0; i < n*pct/100; i++ {
			next[i*100/pct].Description += " Changed."
		}
		for _, full := range []bool{false, true} {
			b.Run(fmt.Sprintf("changed=%d%%/path=%s", pct, pathName(full)), func(b *testing.B) {
				b.Cleanup(index.SetUpdateLimits(1, 1))
				forceFull(b, full)
				incremental := 0
				for i := 0; i < b.N; i++ {
					if update(b, tmpl, next) {
						incremental++
					}
				}
				b.ReportMetric(float64(incremental)/float64(b.N), "incremental")
			})
		}
	}
}

func pathName(full bool) string {
	if full {
		return "full"
	}
	return "incremental"
}
