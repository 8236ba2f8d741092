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
func template(b *testing.B, tools []index.Tool) string {
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

// update runs one timed update of a copy of tmpl to tools.
func update(b *testing.B, tmpl string, tools []index.Tool, wantIncremental bool) {
	b.StopTimer()
	dir := filepath.Join(b.TempDir(), "ix")
	copyTree(b, tmpl, dir)
	b.StartTimer()
	ix, rep, err := index.EnsureReport(context.Background(), dir, tools, nil, nil)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if rep.Incremental != wantIncremental {
		b.Fatalf("incremental = %v, want %v (%+v)", rep.Incremental, wantIncremental, rep)
	}
	ix.Close()
	os.RemoveAll(dir)
	b.StartTimer()
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
				update(b, tmpl, next, !full)
			}
		})
	}
}

// BenchmarkUpdateSteady is many updates in a row on one index, each changing
// another tool: the cost per update including the full build that compacts
// the segments every index.MaxSegments updates.
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
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cur[(i*7919)%n].Description += " Changed again."
				ix, _, err := index.Ensure(context.Background(), dir, cur, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				ix.Close()
			}
		})
	}
}

// BenchmarkUpdateFraction changes a share of a 10,000-tool catalog's
// descriptions, incrementally (limits lifted) and in full: where the two
// cross is where maxUpdateFraction belongs.
func BenchmarkUpdateFraction(b *testing.B) {
	const n = 10000
	tools := indextest.Catalog(n, indextest.Seed)
	tmpl := template(b, tools)
	for _, pct := range []int{1, 5, 10, 25, 50} {
		next := slices.Clone(tools)
		for i := 0; i < n*pct/100; i++ {
			next[i*100/pct].Description += " Changed."
		}
		for _, full := range []bool{false, true} {
			b.Run(fmt.Sprintf("changed=%d%%/path=%s", pct, pathName(full)), func(b *testing.B) {
				b.Cleanup(index.SetUpdateLimits(1, 1))
				forceFull(b, full)
				for i := 0; i < b.N; i++ {
					update(b, tmpl, next, !full)
				}
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
