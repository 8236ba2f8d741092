package live

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
)

// sweepClock is the embedding cache's clock, moved by the test.
type sweepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *sweepClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *sweepClock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// listVersioned makes server list n tools whose descriptions carry build
// (a server that puts its version in its descriptions).
func (p *fakePool) listVersioned(server string, n, build int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var tools []*mcp.Tool
	for i := range n {
		tools = append(tools, &mcp.Tool{Name: fmt.Sprintf("report_%d", i), Description: fmt.Sprintf("Builds report %d of the ledger. Build %d.", i, build)})
	}
	p.tools[server] = tools
}

// servedCatalog is the catalog the loop serves.
func (l *Loop) servedCatalog() []catalog.Tool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current
}

// down makes server's tools unlisted (the server is down).
func (p *fakePool) down(server string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.tools, server)
}

// Through the loop and a real embedding cache, over 45 days of a server
// that changes its descriptions daily: the vectors of old descriptions go
// once out of the catalog for toolgate.embed.keepUnused (before, every
// build's were kept for good), while a server that is down all that time
// keeps its vectors, and a restart finds the catalog's vectors in the
// cache (no re-embedding: no miss).
func TestSweepThroughTheLoop(t *testing.T) {
	dir := t.TempDir()
	cacheDir := filepath.Join(t.TempDir(), "embeddings")
	clk := &sweepClock{t: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	open := func() *embed.Cached {
		t.Helper()
		c, err := embed.NewCached(&fakeEmbedder{model: "m1"}, cacheDir, &embed.CacheOptions{Now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cache := open()
	pool := newFakePool("a", "b")
	pool.listVersioned("a", 5, 0)
	pool.list("b", "banana", "blueberry")
	f := newFixture(t, dir, pool, &Options{Embedder: cache, Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	var bTools []catalog.Tool
	for _, tl := range f.loop.servedCatalog() {
		if tl.Server == "b" {
			bTools = append(bTools, tl)
		}
	}
	bTexts := index.DocumentTexts(cache, bTools)
	if len(bTexts) == 0 {
		t.Fatal("no texts of b in the catalog")
	}
	pool.down("b") // down from day 1 on: its tools stay in the catalog
	const days = 45
	for day := 1; day <= days; day++ {
		clk.advance(24 * time.Hour)
		pool.listVersioned("a", 5, day)
		f.loop.ToolsChanged("a", nil)
		testenv.Eventually(t, fmt.Sprintf("day %d's sweep", day), func() bool { return cache.Stats().Sweeps == int64(day+1) })
	}
	st := cache.Stats()
	// Day 0's to day 13's old texts (5 a day) were out for more than 30 days.
	if st.Dropped != 5*(days-31) {
		t.Errorf("after %d days the sweeps dropped %d vectors, want %d (the old descriptions out for more than 30 days)", days, st.Dropped, 5*(days-31))
	}
	// The loop closed first: its goroutine has compacted the cache after
	// the last sweep (lookups meanwhile find nothing, see Cached.Compact).
	live := index.DocumentTexts(cache, f.loop.servedCatalog())
	if err := f.loop.Close(); err != nil {
		t.Fatal(err)
	}
	misses := cache.Stats().Misses
	if _, err := cache.Embed(context.Background(), bTexts); err != nil {
		t.Fatal(err)
	}
	if st := cache.Stats(); st.Misses != misses {
		t.Errorf("the down server's texts missed the cache %d times, want none: its vectors were swept", st.Misses-misses)
	}
	if err := cache.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart an hour later: the cache holds every text of the catalog
	// (what a rebuild from scratch would embed), and sweeps nothing again.
	clk.advance(time.Hour)
	cache = open()
	defer cache.Close()
	if _, err := cache.Embed(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	if st := cache.Stats(); st.Misses != 0 || st.Hits != int64(len(live)) {
		t.Errorf("after the restart the catalog's %d texts: %+v, want every one a hit", len(live), st)
	}
}
