package live

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/index"
)

// failedLoad is an embedder that loads in the background (as serve's does)
// and whose load failed: Ready and Embed return why.
type failedLoad struct{ fakeEmbedder }

var errLoad = errors.New("load model: Exception during initialization: std::bad_alloc")

func (*failedLoad) Ready(context.Context) error { return errLoad }
func (*failedLoad) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errLoad
}

// TestEmbedderLoadFailedBuildsBM25: when the model fails to load in the
// background (out of memory under ulimit -v or MemoryMax=, out of
// descriptors), the index is built without vectors and searches run
// BM25-only, as the embedder's log line says. The build used to ask the
// embedder for vectors and fail with its load error: a start stopped with
// exit status 1, and every later re-index failed.
func TestEmbedderLoadFailedBuildsBM25(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple")
	data := filepath.Join(t.TempDir(), "data")
	f := newFixture(t, index.Dir(data), pool, &Options{Embedder: &failedLoad{fakeEmbedder{model: "m1"}}, Debounce: time.Millisecond}, "a")
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
}
