package live

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Gateways of two configs on one data folder, each started in turn (or
// both running, re-indexing in turn): the index on disk is the one the
// other config's gateway wrote last. The first one's next start used to
// be a cold one (`not starting warm: the index in the data folder does not
// fit this config`), and its build embedded again every tool the other's
// catalog lacks (the embedding cache held by the other gateway). It now
// starts warm from the index kept for its config, and embeds nothing.
func TestWarmStartAfterAnotherConfig(t *testing.T) {
	dir := t.TempDir()
	emb := &fakeEmbedder{model: "m1"}
	opts := func() *Options { return &Options{Embedder: emb, Debounce: time.Millisecond} }
	pathA := filepath.Join(t.TempDir(), "a.json")
	start := func(f *fixture, what string) {
		t.Helper()
		f.run(t)
		f.wait(t, what, func(s Stats) bool { return s.CatalogGeneration >= 1 && !s.Reindexing })
	}
	poolA := newFakePool("a", "b")
	poolA.list("a", "apple")
	poolA.list("b", "banana")
	a := newFixtureAt(t, pathA, dir, poolA, opts(), "a", "b")
	start(a, "a's first index")

	poolB := newFakePool("b", "c")
	poolB.list("b", "banana")
	poolB.list("c", "cherry")
	b := newFixture(t, dir, poolB, opts(), "b", "c")
	if b.loop.Warm() {
		t.Fatal("b started warm from a's index, which holds server a")
	}
	start(b, "b's first index")

	// a again, on the same config file: warm, from its own index.
	pool := newFakePool("a", "b") // nothing listed yet
	again := newFixtureAt(t, pathA, dir, pool, opts(), "a", "b")
	if !again.loop.Warm() {
		t.Fatalf("a's second start is a cold one after b's index:\n%s", again.logs)
	}
	again.run(t)
	if got := again.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("warm search apple = %v", got)
	}
	texts := emb.texts.Load() // the query's embedded
	pool.list("a", "apple")
	pool.list("b", "banana")
	again.loop.ToolsChanged("a", nil)
	again.wait(t, "the listings acted on", func(s Stats) bool { return !s.Reindexing })
	// A change of a's tools re-indexes over b's index on disk: the vector
	// of a's unchanged tool comes from a's kept index, not the model.
	pool.list("a", "apple", "avocado")
	again.loop.ToolsChanged("a", nil)
	again.wait(t, "the re-index", func(s Stats) bool { return s.CatalogGeneration == 2 && !s.Reindexing })
	if n := emb.texts.Load() - texts; n > 3 { // avocado's views only
		t.Errorf("a embedded %d texts after b's index; want avocado's 3 at most", n)
	}
}
