package index

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/index/catalog"
)

// onFile returns an index of ix's tools whose rows are ix's written to a
// vectors file and read from it, as an index opened from disk reads them.
func onFile(tb testing.TB, ix *Index) *Index {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), vectorsFile)
	if err := writeVectors(path, ix.vecs, len(ix.tools), ix.dim); err != nil {
		tb.Fatal(err)
	}
	vf, err := openVectors(path, len(ix.tools), ix.dim)
	if err != nil {
		tb.Fatal(err)
	}
	out := &Index{tools: ix.tools, ids: ix.ids, byID: ix.byID, dim: ix.dim, vf: vf}
	tb.Cleanup(func() { out.Close() })
	return out
}

// An index opened from disk reads its rows from the file, in chunks for
// the full passes and one at a time for Scan's rescoring, Cosine and
// Vector; every answer is bit for bit the in-memory index's, with the
// 8-bit copy (dim 48) and without it (dim 12: Scan scores the rows from
// the file), whole and filtered. The file is never mapped.
func TestFileRowsMatchMemory(t *testing.T) {
	tools := syntheticTools(3*rowChunk + 37)
	for _, dim := range []int{48, 12} {
		t.Run(fmt.Sprintf("dim=%d", dim), func(t *testing.T) {
			emb := &fakeEmbedder{id: fmt.Sprintf("fake/%d", dim), dim: dim}
			mem, err := Build(context.Background(), tools, emb, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			disk, _ := mustEnsure(t, t.TempDir(), tools, emb)
			if disk.vf == nil || disk.vecs != nil {
				t.Fatal("the index opened from disk holds its rows in memory")
			}
			half := NewFilter(func(t catalog.Tool) bool { return len(t.Name)%2 == 0 })
			for _, text := range []string{"list files in a bucket", "send a message", "delete the invoice page"} {
				q := fakeVector(text, dim)
				for _, server := range []string{"", "server07"} {
					for _, k := range []int{1, 10, len(tools)} {
						if d := cmp.Diff(mem.Nearest(q, k, server), disk.Nearest(q, k, server)); d != "" {
							t.Fatalf("%q server %q k %d Nearest (-memory +file):\n%s", text, server, k, d)
						}
						if d := cmp.Diff(mem.Scan(q, k, server), disk.Scan(q, k, server)); d != "" {
							t.Fatalf("%q server %q k %d Scan (-memory +file):\n%s", text, server, k, d)
						}
						if d := cmp.Diff(mem.In(half).Scan(q, k, server), disk.In(half).Scan(q, k, server)); d != "" {
							t.Fatalf("%q server %q k %d filtered Scan (-memory +file):\n%s", text, server, k, d)
						}
					}
					if m, f := mem.In(half).CosineSum(q, server), disk.In(half).CosineSum(q, server); m != f {
						t.Fatalf("%q server %q: filtered CosineSum %v in memory, %v from the file", text, server, m, f)
					}
				}
				for _, i := range []int{0, 1, rowChunk - 1, rowChunk, len(tools) - 1} {
					id := tools[i].ID()
					mc, mok := mem.Cosine(q, id)
					fc, fok := disk.Cosine(q, id)
					if !mok || !fok || mc != fc {
						t.Fatalf("Cosine(%s): %v %v in memory, %v %v from the file", id, mc, mok, fc, fok)
					}
					mv, _ := mem.Vector(id)
					fv, ok := disk.Vector(id)
					if d := cmp.Diff(mv, fv); !ok || d != "" {
						t.Fatalf("Vector(%s) %v (-memory +file):\n%s", id, ok, d)
					}
				}
			}
			if (disk.copy8.Load() != nil) != (dim%16 == 0) {
				t.Fatalf("dim %d: 8-bit copy made: %v", dim, disk.copy8.Load() != nil)
			}
			maps, err := os.ReadFile("/proc/self/maps")
			if err == nil && strings.Contains(string(maps), vectorsFile) {
				t.Fatal("the vectors file is mapped")
			}
		})
	}
}

// A re-index copies the vectors it can keep from the previous generation's
// file, over chunk boundaries, as they were.
func TestReuseReadsOldRows(t *testing.T) {
	dir := t.TempDir()
	tools := syntheticTools(2*rowChunk + 5)
	emb := newCaching("fake/32")
	old, _ := mustEnsure(t, dir, tools, emb)
	want := map[string][]float32{}
	for _, tl := range tools {
		want[tl.ID()], _ = old.Vector(tl.ID())
	}
	old.Close()
	changed := append([]catalog.Tool(nil), tools[1:]...)
	changed[rowChunk].Description = "a description no generation has embedded"
	ix, rep := mustEnsure(t, dir, changed, emb)
	if rep.Reused != len(changed)-1 || rep.Embedded != 1 {
		t.Fatalf("reused %d, embedded %d; want %d and 1", rep.Reused, rep.Embedded, len(changed)-1)
	}
	for i, tl := range changed {
		got, _ := ix.Vector(tl.ID())
		if i == rowChunk {
			if cmp.Equal(got, want[tl.ID()]) {
				t.Fatalf("%s kept its old vector for a new description", tl.ID())
			}
			continue
		}
		if d := cmp.Diff(want[tl.ID()], got); d != "" {
			t.Fatalf("%s (-old +reused):\n%s", tl.ID(), d)
		}
	}
}

// Once an index opened from disk is closed, reading its rows fails cleanly,
// whether or not PrepareScan ran before, during or not at all (run with
// -race).
func TestFileRowsClosed(t *testing.T) {
	for i := range 20 {
		mem, q := scanIndex(2*scanChunk + 5)
		ix := onFile(t, mem)
		ix.byID = map[string]int{ix.tools[3].ID(): 3}
		done := make(chan struct{})
		go func() {
			if i%2 == 0 {
				ix.PrepareScan()
			}
			ix.Scan(q, 10, "")
			close(done)
		}()
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
		if got := ix.Scan(q, 10, ""); got.Top != nil || got.N != 0 {
			t.Fatalf("closed index scanned %d rows", got.N)
		}
		if got := ix.Nearest(q, 10, ""); got != nil {
			t.Fatalf("closed index found %d nearest", len(got))
		}
		if _, ok := ix.Cosine(q, ix.tools[3].ID()); ok {
			t.Fatal("closed index gave a cosine")
		}
		if _, ok := ix.Vector(ix.tools[3].ID()); ok {
			t.Fatal("closed index gave a vector")
		}
	}
}
