package search_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/search"
)

// heldEmbedder holds every Embed call until release is closed, counting
// the calls in it and the most at once.
type heldEmbedder struct {
	hashEmbedder
	release      chan struct{}
	inside, most atomic.Int64
}

func (h *heldEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	n := h.inside.Add(1)
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
	defer h.inside.Add(-1)
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.hashEmbedder.Embed(ctx, texts)
}

// Many clients searching at once: the searches beyond the engine's slots
// wait their turn before they start (holding none of the keyword half's
// per-tool scores while the query embedding is busy), and all are answered.
func TestSearchesBounded(t *testing.T) {
	ix := build(t, testCatalog, &hashEmbedder{})
	emb := &heldEmbedder{release: make(chan struct{})}
	e := search.New(ix, emb, nil)
	defer e.Close()
	slots := search.SearchSlots()
	n := slots + 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = e.Search(context.Background(), search.Query{Text: "read a file", Mode: search.ModeHybrid})
		})
	}
	// Every search is either in the embedder or waiting for a slot.
	for emb.inside.Load()+int64(e.State().Waiting) != int64(n) {
		runtime.Gosched()
	}
	if got := emb.most.Load(); got > int64(slots) {
		t.Errorf("%d searches embedding at once, want at most the engine's %d slots", got, slots)
	}
	// What GET /status and toolgate_search_{running,waiting} show.
	if st := e.State(); st.Waiting != n-slots || st.Running != slots || st.Slots != slots {
		t.Errorf("State(): %d searches running, %d waiting, %d slots; want %d, %d and %d", st.Running, st.Waiting, st.Slots, slots, n-slots, slots)
	}
	close(emb.release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("search %d: %v", i, err)
		}
	}
	if q := e.State().Waiting; q != 0 {
		t.Errorf("%d searches still waiting", q)
	}
}

// A search waiting for a slot ends with its context.
func TestSearchWaitCanceled(t *testing.T) {
	ix := build(t, testCatalog, &hashEmbedder{})
	emb := &heldEmbedder{release: make(chan struct{})}
	e := search.New(ix, emb, nil)
	defer e.Close()
	slots := search.SearchSlots()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(emb.release) // before the Wait: deferred calls run last first
	for range slots {
		wg.Go(func() { _, _ = e.Search(context.Background(), search.Query{Text: "read a file"}) })
	}
	for emb.inside.Load() != int64(slots) {
		runtime.Gosched()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Search(ctx, search.Query{Text: "write a file"})
		done <- err
	}()
	for e.State().Waiting != 1 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("waiting search canceled: err = %v, want context.Canceled", err)
	}
}
