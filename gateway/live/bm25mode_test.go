package live

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/search"
)

// countingEmbedder counts the texts it is asked to embed, and the calls
// of Start (a deferred model load started: embed.Options.Lazy).
type countingEmbedder struct {
	fakeEmbedder
	texts, starts atomic.Int64
}

func (e *countingEmbedder) Start() { e.starts.Add(1) }

func (e *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.texts.Add(int64(len(texts)))
	return e.fakeEmbedder.Embed(ctx, texts)
}

// TestBM25ModeBuildsNoVectors: in bm25 mode (toolgate.search.mode, serve
// --mode bm25) no search reads vectors, so the index is built without
// them: a cold start's searches answer before anything is embedded, as
// does a re-index, and a warm start takes that index as it is. A cold
// start of 50,000 tools in bm25 mode embedded every one first (some 20
// minutes on two loaded cores), its searches saying "the tool index is
// being built". A reload to hybrid builds the vectors in the background,
// and the BM25 index answers meanwhile.
//
// Nor is the model's load started (serve defers it in bm25 mode) until
// the reload to hybrid, which starts it at once.
func TestBM25ModeBuildsNoVectors(t *testing.T) {
	from := func(s config.SearchSettings) *search.Options {
		return &search.Options{Mode: cmp.Or(search.Mode(s.Mode), search.ModeBM25)}
	}
	dir := index.Dir(filepath.Join(t.TempDir(), "data"))
	opts := func(emb index.Embedder) *Options {
		return &Options{Embedder: emb, Search: from(config.SearchSettings{}), SearchFrom: from, Debounce: time.Millisecond, StorageRetry: 10 * time.Millisecond}
	}
	{ // cold
		emb := &countingEmbedder{fakeEmbedder: fakeEmbedder{model: "m1"}}
		pool := newFakePool("a")
		pool.list("a", "apple")
		f := newFixture(t, dir, pool, opts(emb), "a")
		f.run(t)
		if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
			t.Errorf("search apple = %v", got)
		}
		pool.list("a", "apple", "avocado")
		f.loop.ToolsChanged("a", nil)
		f.wait(t, "the re-index", func(s Stats) bool { return s.CatalogGeneration == 2 && !s.Reindexing })
		if got := f.find(t, "avocado", 1); !slices.Equal(got, []string{"a__avocado"}) {
			t.Errorf("search avocado = %v", got)
		}
		if n := emb.texts.Load(); n != 0 {
			t.Errorf("bm25 mode embedded %d tool texts for its index", n)
		}
		if n := emb.starts.Load(); n != 0 {
			t.Errorf("a cold start in bm25 mode started the model's load %d times", n)
		}
		if st := f.loop.eng.Load().State(); st.Mode != search.ModeBM25 || st.BM25Only {
			t.Errorf("state in bm25 mode: %+v", st)
		}
		if err := f.loop.Close(); err != nil {
			t.Fatal(err)
		}
	}
	emb := &countingEmbedder{fakeEmbedder: fakeEmbedder{model: "m1"}}
	pool := newFakePool("a") // never lists: the warm catalog is served
	f := newFixture(t, dir, pool, opts(emb), "a")
	if !f.loop.Warm() {
		t.Fatalf("no warm start in bm25 mode from an index without vectors:\n%s", f.logs)
	}
	f.run(t)
	if got := f.find(t, "avocado", 1); !slices.Equal(got, []string{"a__avocado"}) {
		t.Errorf("warm search avocado = %v", got)
	}
	if n := emb.texts.Load(); n != 0 {
		t.Errorf("a warm start in bm25 mode embedded %d tool texts", n)
	}
	if n := emb.starts.Load(); n != 0 {
		t.Errorf("a warm start in bm25 mode started the model's load %d times", n)
	}
	// The save is applied by the config file's watcher, as serve applies
	// it. A Reload of the test's own raced the watcher's (debounce 1 ms):
	// the second of the two found the change in effect and applied nothing.
	writeFile(t, f.path, configBytes(t, map[string]any{"search": map[string]any{"mode": "hybrid"}}, "a"))
	f.wait(t, "the reload to hybrid", func(s Stats) bool {
		return s.LastReload != nil && slices.Equal(s.LastReload.Applied, []string{"toolgate.search"})
	})
	if n := emb.starts.Load(); n == 0 {
		t.Error("the reload to hybrid did not start the model's load")
	}
	f.wait(t, "the re-index with the model's vectors", func(Stats) bool {
		degraded, _ := f.loop.eng.Load().Degraded()
		return !degraded
	})
	if n, want := emb.texts.Load(), len(index.DocumentTexts(emb, f.loop.Catalog())); n != int64(want) {
		t.Errorf("hybrid mode embedded %d tool texts, want the catalog's %d", n, want)
	}
	if st := f.loop.eng.Load().State(); st.Mode != search.ModeHybrid || st.Model != "m1" {
		t.Errorf("state after the switch to hybrid: %+v", st)
	}
}

// TestHybridWarmFromBM25Index: a gateway started in hybrid mode on the
// index a bm25 one left (no vectors) starts warm, answering BM25-only,
// and builds the vectors in the background; it was a cold start that
// embedded every tool before its searches answered.
func TestHybridWarmFromBM25Index(t *testing.T) {
	dir := index.Dir(filepath.Join(t.TempDir(), "data"))
	emb := &countingEmbedder{fakeEmbedder: fakeEmbedder{model: "m1"}}
	{
		f, _ := runApple(t, dir, &Options{Embedder: emb, Search: &search.Options{Mode: search.ModeBM25}})
		if err := f.loop.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := emb.texts.Load(); n != 0 {
		t.Fatalf("bm25 mode embedded %d tool texts", n)
	}
	f := newFixture(t, dir, newFakePool("a"), &Options{Embedder: emb, Debounce: time.Millisecond, StorageRetry: time.Hour}, "a")
	if !f.loop.Warm() {
		t.Fatalf("no warm start in hybrid mode from an index without vectors:\n%s", f.logs)
	}
	f.run(t)
	f.wait(t, "the re-index with the model's vectors", func(Stats) bool {
		degraded, _ := f.loop.eng.Load().Degraded()
		return !degraded
	})
	if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("search apple = %v", got)
	}
}
