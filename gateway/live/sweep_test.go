package live

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// sweepingEmbedder is a fakeEmbedder with embed.Cached's Sweep and Compact:
// it records the texts of each sweep and says it dropped one vector.
type sweepingEmbedder struct {
	fakeEmbedder
	mu       sync.Mutex
	sweeps   [][]string
	compacts int
}

func (e *sweepingEmbedder) Sweep(_ context.Context, live []string) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sweeps = append(e.sweeps, slices.Clone(live))
	return 1, nil
}

func (e *sweepingEmbedder) Compact() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.compacts++
	return nil
}

// swept returns the texts of each sweep so far and the compactions.
func (e *sweepingEmbedder) swept() ([][]string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sweeps), e.compacts
}

func mentions(texts []string, word string) bool {
	return slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, word) })
}

// The embedding cache is swept with the catalog each build indexed, but
// never while a configured server's tools are unknown (down or not listed
// yet at a cold start: its vectors would start to age); on a warm start a
// server that is down keeps its tools from the last catalog, so they are
// in the sweep. A sweep that dropped vectors is followed by a compaction.
func TestSweepWaitsForEveryServer(t *testing.T) {
	dir := t.TempDir()
	emb := &sweepingEmbedder{fakeEmbedder: fakeEmbedder{model: "m1"}}
	pool := newFakePool("a", "b")
	pool.list("a", "apple") // b is down
	f := newFixture(t, dir, pool, &Options{Embedder: emb, Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	if sweeps, _ := emb.swept(); len(sweeps) != 0 {
		t.Fatalf("swept at a cold start without b's tools: %q", sweeps)
	}
	pool.list("b", "banana")
	f.loop.ToolsChanged("b", nil)
	// The sweep comes once the index is served, then the compaction
	// after it (it dropped); the cold build's was the first.
	testenv.Eventually(t, "the compaction after the sweep", func() bool { _, n := emb.swept(); return n == 2 })
	sweeps, _ := emb.swept()
	if len(sweeps) != 1 || !mentions(sweeps[0], "banana") || !mentions(sweeps[0], "apple") {
		t.Fatalf("sweeps once b listed: %q, want one with a's and b's texts", sweeps)
	}
	if err := f.loop.Close(); err != nil {
		t.Fatal(err)
	}

	// A warm start: b is down again, a lists a new tool.
	emb = &sweepingEmbedder{fakeEmbedder: fakeEmbedder{model: "m1"}}
	pool = newFakePool("a", "b")
	f = newFixture(t, dir, pool, &Options{Embedder: emb, Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	pool.list("a", "apple", "avocado")
	f.loop.ToolsChanged("a", nil)
	testenv.Eventually(t, "the sweep after the re-index", func() bool { s, _ := emb.swept(); return len(s) > 0 })
	sweeps, _ = emb.swept()
	if len(sweeps) != 1 || !mentions(sweeps[0], "banana") || !mentions(sweeps[0], "avocado") {
		t.Errorf("sweeps of a warm start with b down: %q, want one with b's texts (kept from the last catalog) and a's new one", sweeps)
	}
}
