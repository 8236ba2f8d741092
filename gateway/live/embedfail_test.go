package live

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/index"
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
