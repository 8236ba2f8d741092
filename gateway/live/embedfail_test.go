package live

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/search"
)

// failedLoad is an embedder that loads in the background (as serve's does)
// and whose load failed: Ready and Embed return why, until loaded is set
// (a retry of the load worked).
type failedLoad struct {
	fakeEmbedder
	loaded atomic.Bool
}

var errLoad = errors.New("load model: Exception during initialization: std::bad_alloc")

func (e *failedLoad) Ready(context.Context) error {
	if e.loaded.Load() {
		return nil
	}
	return errLoad
}

func (e *failedLoad) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.loaded.Load() {
		return e.fakeEmbedder.Embed(ctx, texts)
	}
	return nil, errLoad
}

// TestEmbedderLoadFailedBuildsBM25: when the model fails to load in the
// background (out of memory under ulimit -v or MemoryMax=, out of
// descriptors), the index is built without vectors and searches run
// BM25-only, as the embedder's log line says. The build used to ask the
// embedder for vectors and fail with its load error: a start stopped with
// exit status 1, and every later re-index failed. Once the model loads (the
// embedder tries again after a shortage), the loop re-indexes with its
// vectors by itself: searches used to stay BM25-only until a restart.
func TestEmbedderLoadFailedBuildsBM25(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple")
	data := filepath.Join(t.TempDir(), "data")
	emb := &failedLoad{fakeEmbedder: fakeEmbedder{model: "m1"}}
	f := newFixture(t, index.Dir(data), pool, &Options{Embedder: emb, Debounce: time.Millisecond, StorageRetry: 10 * time.Millisecond}, "a")
	f.run(t)
	if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("search apple = %v", got)
	}
	pool.list("a", "apple", "avocado")
	f.loop.ToolsChanged("a", nil)
	st := f.wait(t, "the re-index", func(s Stats) bool { return s.CatalogGeneration == 2 && !s.Reindexing })
	if st.LastIndexError != "" || st.CatalogTools != 2 {
		t.Errorf("re-index with the model not loaded: %+v", st)
	}
	if got := f.find(t, "avocado", 1); !slices.Equal(got, []string{"a__avocado"}) {
		t.Errorf("search avocado = %v", got)
	}
	if degraded, why := f.loop.eng.Load().Degraded(); !degraded {
		t.Fatalf("vectors without a model: %q", why)
	}
	emb.loaded.Store(true)
	f.wait(t, "the re-index with the model's vectors", func(Stats) bool {
		degraded, _ := f.loop.eng.Load().Degraded()
		return !degraded
	})
}

// notInstalled is serve's embedder when the model's files are not installed
// yet: ModelID is "", Ready and Embed say what is missing, until install
// (the files arrived and loaded).
type notInstalled struct {
	model     atomic.Pointer[string]
	installed chan struct{} // closed by install, when made
}

var errNotInstalled = errors.New("model file not found at /models/all-MiniLM-L6-v2/model.onnx: install it with toolgate models fetch")

func (e *notInstalled) install(model string) {
	e.model.Store(&model)
	if e.installed != nil {
		close(e.installed)
	}
}

func (e *notInstalled) Installed() <-chan struct{} { return e.installed }

func (e *notInstalled) ModelID() string {
	if m := e.model.Load(); m != nil {
		return *m
	}
	return ""
}

func (e *notInstalled) Dim() int { return 4 }

func (e *notInstalled) Ready(context.Context) error {
	if e.model.Load() == nil {
		return errNotInstalled
	}
	return nil
}

func (e *notInstalled) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := e.Ready(ctx); err != nil {
		return nil, err
	}
	return (&fakeEmbedder{model: e.ModelID()}).Embed(ctx, texts)
}

// TestModelInstalledWhileServing: a gateway started before the model was
// fetched serves BM25-only, and once the files are there (its embedder
// loads them) it re-indexes with their vectors by itself, although the
// catalog is the one it serves; it used to stay BM25-only until a restart.
// A warm index whose vectors are the arriving model's is kept (no
// re-index); one of another model is rebuilt.
func TestModelInstalledWhileServing(t *testing.T) {
	t.Run("cold", func(t *testing.T) {
		pool := newFakePool("a")
		pool.list("a", "apple")
		// Only the embedder's signal can start the re-index: the loop's
		// own look (StorageRetry) comes after the test's end.
		emb := &notInstalled{installed: make(chan struct{})}
		f := newFixture(t, index.Dir(filepath.Join(t.TempDir(), "data")), pool,
			&Options{Embedder: emb, Debounce: time.Millisecond, StorageRetry: time.Hour}, "a")
		f.run(t)
		if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
			t.Errorf("search apple = %v", got)
		}
		if degraded, _ := f.loop.eng.Load().Degraded(); !degraded {
			t.Fatal("vectors without a model")
		}
		emb.install("m1")
		f.wait(t, "the re-index with the model's vectors", func(Stats) bool {
			degraded, _ := f.loop.eng.Load().Degraded()
			return !degraded
		})
		if st := f.loop.Stats(); st.CatalogGeneration != 2 || st.CatalogTools != 1 {
			t.Errorf("after the model came: %+v, want generation 2 with 1 tool", st)
		}
	})

	dir := index.Dir(filepath.Join(t.TempDir(), "data"))
	{ // the last run, with model m1
		f, _ := runApple(t, dir, &Options{Embedder: &fakeEmbedder{model: "m1"}})
		if err := f.loop.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		model   string
		reindex bool
	}{{"m1", false}, {"m2", true}} {
		t.Run("warm, then "+tc.model, func(t *testing.T) {
			pool := newFakePool("a") // never lists: the warm catalog is served
			emb := &notInstalled{}
			f := newFixture(t, dir, pool, &Options{Embedder: emb, Debounce: time.Millisecond, StorageRetry: 10 * time.Millisecond}, "a")
			if !f.loop.Warm() {
				t.Fatalf("no warm start with the model not installed:\n%s", f.logs)
			}
			f.run(t)
			mode := func() search.Mode {
				t.Helper()
				res, err := f.loop.Search(context.Background(), search.Query{Text: "apple", Limit: 1, Mode: search.ModeHybrid, Filter: f.loop.Policy().Filter(nil)})
				if err != nil || len(res.Hits) != 1 || res.Hits[0].Tool.ID() != "a__apple" {
					t.Fatalf("search apple = %+v, %v", res, err)
				}
				return res.Mode
			}
			if m := mode(); m != search.ModeBM25 {
				t.Errorf("hybrid search with the model not installed answered in mode %s, want bm25", m)
			}
			emb.install(tc.model)
			if tc.reindex {
				f.wait(t, "the re-index with "+tc.model+"'s vectors", func(s Stats) bool { return s.CatalogGeneration == 2 && !s.Reindexing })
				if !strings.Contains(f.logs.String(), "re-indexing with its vectors") {
					t.Errorf("the log does not say why it re-indexed:\n%s", f.logs)
				}
			} else if f.loop.modelBack(context.Background()) {
				t.Error("the warm index holds the model's vectors, yet the loop would rebuild it")
			}
			if m := mode(); m != search.ModeHybrid {
				t.Errorf("hybrid search once the model is there answered in mode %s", m)
			}
		})
	}
}
