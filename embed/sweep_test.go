package embed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
)

// testClock is a clock the test moves (CacheOptions.Now).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)} }

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// clockedCache is a cache in a temporary folder around a fake model of
// 8 dimensions, its clock moved by the test, closed at the test's end.
func clockedCache(t *testing.T) (*Cached, *fakeModel, *testClock) {
	t.Helper()
	clk := newTestClock()
	inner := &fakeModel{id: "fake/a@1", dim: 8}
	c, err := NewCached(inner, t.TempDir(), &CacheOptions{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, inner, clk
}

// keyCount counts the store's keys by their first byte.
func keyCount(t *testing.T, c *Cached) map[byte]int {
	t.Helper()
	n := map[byte]int{}
	c.mu.RLock()
	defer c.mu.RUnlock()
	err := c.store.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n[it.Item().Key()[0]]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// tableBytes is the size of the store's tables on disk (where its vectors
// are: they are under the value threshold).
func tableBytes(t testing.TB, dir string) int64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// churnCatalog is a catalog of 50 texts that never change and 20 whose
// description carries the build number (a server that puts its version
// in its descriptions).
func churnCatalog(build int) []string {
	var texts []string
	for i := range 50 {
		texts = append(texts, fmt.Sprintf("stable tool %d: reads the ledger", i))
	}
	for i := range 20 {
		texts = append(texts, fmt.Sprintf("report %d: builds the sales report. Build %d.", i, build))
	}
	return texts
}

// A server whose descriptions change every day grew the cache by its
// changed texts for good (the vectors of every description it ever had:
// 70 + 20 a day, 1,270 after 60 days). With a sweep after each day's
// build, the cache holds the catalog plus the texts that left it within
// DefaultUnused (and a day or two of sweep rounding), and the tables on
// disk stop growing once those start to go.
func TestCacheSweepBoundsChurn(t *testing.T) {
	dir := t.TempDir()
	clk := newTestClock()
	c, err := NewCached(&fakeModel{id: "fake/a@1", dim: 384}, dir, &CacheOptions{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const days = 60
	var sizes []int64
	for day := range days {
		live := churnCatalog(day)
		mustEmbed(t, c, live...) // the day's build
		dropped, err := c.Sweep(ctx, live)
		if err != nil {
			t.Fatal(err)
		}
		if dropped > 0 { // as serve does
			if err := c.Compact(); err != nil {
				t.Fatal(err)
			}
		}
		sizes = append(sizes, tableBytes(t, dir))
		clk.advance(24 * time.Hour)
	}
	vecs := keyCount(t, c)[keyVecPfx]
	t.Logf("after %d days of churn: %d vectors (without sweeps: %d), tables %d KiB (day 10: %d KiB, day 35: %d KiB)", days, vecs, 70+20*(days-1), sizes[days-1]>>10, sizes[9]>>10, sizes[34]>>10)
	// Each changed text is stamped at the sweep after it left the catalog
	// and dropped at the first sweep more than 30 days after that.
	bound := 70 + 20*(int(DefaultUnused/(24*time.Hour))+2)
	if vecs > bound {
		t.Errorf("the cache holds %d vectors after %d days of churn, want at most %d (the catalog and the texts that left it within %v)", vecs, days, bound, DefaultUnused)
	}
	if st := c.Stats(); st.Sweeps != days || st.Dropped == 0 {
		t.Errorf("stats %+v, want %d sweeps that dropped vectors", st, days)
	}
	if sizes[days-1] > sizes[34]*11/10 {
		t.Errorf("tables grew from %d bytes (day 35) to %d (day %d): the sweep's deletions did not give the disk space back", sizes[34], sizes[days-1], days)
	}
	// The catalog itself was never dropped: today's build embeds nothing.
	before := c.Stats().Misses
	mustEmbed(t, c, churnCatalog(days-1)...)
	if m := c.Stats().Misses - before; m != 0 {
		t.Errorf("the catalog's texts missed the cache %d times after the sweeps, want 0", m)
	}
}

// A text out of the catalog is kept for DefaultUnused from the first sweep
// that found it out, and goes at the first sweep after; a text back in the
// catalog meanwhile (another config on the data folder, a server enabled
// again) loses its stamp, even at a call that is not due.
func TestCacheSweepKeepsForUnused(t *testing.T) {
	c, inner, clk := clockedCache(t)
	ctx := context.Background()
	mustEmbed(t, c, "kept", "gone", "back")
	sweep := func(live ...string) int {
		t.Helper()
		n, err := c.Sweep(ctx, live)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := sweep("kept"); n != 0 { // "gone" and "back" stamped now
		t.Fatalf("first sweep dropped %d", n)
	}
	clk.advance(time.Hour)
	sweep("kept", "back") // not due: takes "back"'s stamp off only
	if st := c.Stats(); st.Sweeps != 1 {
		t.Errorf("%d sweeps ran, want 1 (the second call came within SweepEvery)", st.Sweeps)
	}
	clk.advance(DefaultUnused - time.Hour)
	if n := sweep("kept"); n != 0 { // exactly DefaultUnused: kept; "back" stamped anew
		t.Errorf("sweep at %v dropped %d, want 0", DefaultUnused, n)
	}
	clk.advance(25 * time.Hour)
	if n := sweep("kept"); n != 1 {
		t.Errorf("sweep after %v dropped %d, want 1 (gone)", DefaultUnused+25*time.Hour, n)
	}
	before := len(inner.texts())
	mustEmbed(t, c, "kept", "back")
	mustEmbed(t, c, "gone")
	if got := inner.texts()[before:]; len(got) != 1 || got[0] != "gone" {
		t.Errorf("embedded again %q, want only gone", got)
	}
	if n := keyCount(t, c); n[keyUnusedPfx] != 1 { // "back"'s
		t.Errorf("%d stamps, want 1", n[keyUnusedPfx])
	}
}

// What a sweep did stays done across a restart, and a warm start embeds
// nothing: the catalog's vectors are all read from the cache (hits, no
// misses). The time of the last sweep is kept too, so a restart does not
// sweep again within SweepEvery, and a stamp set before the restart counts.
func TestCacheSweepAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clk := newTestClock()
	open := func() *Cached {
		t.Helper()
		c, err := NewCached(&fakeModel{id: "fake/a@1", dim: 384}, dir, &CacheOptions{Now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	c := open()
	mustEmbed(t, c, churnCatalog(1)...)
	mustEmbed(t, c, churnCatalog(2)...)
	live := churnCatalog(2)
	if _, err := c.Sweep(ctx, live); err != nil { // build 1's 20 texts stamped
		t.Fatal(err)
	}
	if err := c.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	clk.advance(time.Hour)
	c = open()
	mustEmbed(t, c, live...)
	if st := c.Stats(); st.Misses != 0 || st.Hits != int64(len(live)) {
		t.Errorf("warm start after a sweep: %+v, want %d hits and no miss", st, len(live))
	}
	if n, err := c.Sweep(ctx, live); err != nil || n != 0 || c.Stats().Sweeps != 0 {
		t.Errorf("sweep an hour after the last one, across a restart: dropped %d, %v, stats %+v; want not run", n, err, c.Stats())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	clk.advance(DefaultUnused + time.Hour)
	c = open()
	defer c.Close()
	if n, err := c.Sweep(ctx, live); err != nil || n != 20 {
		t.Errorf("sweep %v after the stamps, across a restart: dropped %d, %v; want build 1's 20 texts", DefaultUnused, n, err)
	}
	if err := c.Compact(); err != nil {
		t.Fatal(err)
	}
	mustEmbed(t, c, live...)
	if st := c.Stats(); st.Misses != 0 {
		t.Errorf("the catalog after the sweep: %+v, want no miss", st)
	}
}

// Query vectors keep their own expiry (EmbedQueries): a sweep neither
// stamps nor drops them; a store that is not the cache's to write (a
// closed one) is not swept.
func TestCacheSweepLeavesQueries(t *testing.T) {
	clk := newTestClock()
	c, err := NewCached(&fakeModel{id: "fake/a@1", dim: 8}, t.TempDir(), &CacheOptions{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.EmbedQueries(ctx, []string{"a query"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Sweep(ctx, nil); err != nil {
			t.Fatal(err)
		}
		clk.advance(DefaultUnused + 48*time.Hour)
	}
	if n := keyCount(t, c); n[keyQueryPfx] != 1 || n[keyUnusedPfx] != 0 {
		t.Errorf("keys %v after sweeps, want the query's vector, unstamped", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Sweep(ctx, nil); n != 0 || err != nil {
		t.Errorf("sweep of a closed cache: %d, %v", n, err)
	}
}

// sweepBenchTexts are the texts of 10,000 tools as index.DocumentTexts
// gives them (live) and the texts of 3,000 of their descriptions before
// they changed.
func sweepBenchTexts(b *testing.B) (live, changed []string) {
	tools := indextest.Catalog(10000, indextest.Seed)
	live = index.DocumentTexts(&fakeModel{}, tools)
	for i, t := range tools[:3000] {
		t.Description = fmt.Sprintf("%s Version %d.", t.Description, i)
		for _, v := range index.DocumentTexts(&fakeModel{}, []catalog.Tool{t}) {
			if !slices.Contains(live, v) {
				changed = append(changed, v)
			}
		}
	}
	b.Logf("%d tools: %d catalog texts, %d texts of their descriptions before they changed", len(tools), len(live), len(changed))
	return live, changed
}

// sweepBenchCache is a cache that holds the vectors of live, changed and
// queries search queries ("asked before <i>"), compacted.
func sweepBenchCache(b *testing.B, live, changed []string, queries int) (*Cached, *testClock) {
	ctx := context.Background()
	clk := newTestClock()
	c, err := NewCached(&fakeModel{id: "fake/a@1", dim: 384}, b.TempDir(), &CacheOptions{Now: clk.now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	for _, texts := range [][]string{live, changed} {
		for chunk := range slices.Chunk(texts, 256) {
			if _, err := c.Embed(ctx, chunk); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range queries {
		if _, err := c.EmbedQueries(ctx, []string{fmt.Sprintf("asked before %d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Compact(); err != nil {
		b.Fatal(err)
	}
	return c, clk
}

// BenchmarkCacheSweep is the sweep at 10,000 tools (27,504 texts as
// index.DocumentTexts gives them, and the 3,000 of 3,000 descriptions
// before they changed): "due" is the daily pass (every vector key read,
// the old texts stamped), "notdue" a call within SweepEvery (the stamps
// read alone), "drop" a pass that drops the old texts and the Compact
// after it, which holds lookups (ms/compact), and "reopen" a warm start
// of the cache (opened, every catalog text read back) after 0, 1 (stamps
// written) or 2 sweeps (old texts dropped):
//
//	go test ./embed -run '^$' -bench CacheSweep -benchtime 5x
func BenchmarkCacheSweep(b *testing.B) {
	live, changed := sweepBenchTexts(b)
	ctx := context.Background()
	setup := func(b *testing.B) (*Cached, *testClock) { return sweepBenchCache(b, live, changed, 0) }
	sweep := func(b *testing.B, c *Cached) int {
		n, err := c.Sweep(ctx, live)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	b.Run("due", func(b *testing.B) {
		c, clk := setup(b)
		b.ReportMetric(float64(len(live)+len(changed)), "vectors")
		for b.Loop() {
			sweep(b, c)
			clk.advance(SweepEvery)
		}
	})
	b.Run("notdue", func(b *testing.B) {
		c, _ := setup(b)
		sweep(b, c)
		for b.Loop() {
			sweep(b, c)
		}
	})
	// A warm start of the cache (open, every catalog text read back: what
	// a rebuild from the cache does), of a store never swept and of one
	// swept (the changed texts stamped, then dropped), compacted alike.
	for _, swept := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("reopen/sweeps%d", swept), func(b *testing.B) {
			c, clk := setup(b)
			for range swept {
				sweep(b, c)
				clk.advance(DefaultUnused + SweepEvery)
			}
			c.dirty.Store(true)
			if err := c.Compact(); err != nil {
				b.Fatal(err)
			}
			dir := c.dir
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				c, err := NewCached(&fakeModel{id: "fake/a@1", dim: 384}, dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				for chunk := range slices.Chunk(live, 256) {
					if _, err := c.Embed(ctx, chunk); err != nil {
						b.Fatal(err)
					}
				}
				if st := c.Stats(); st.Misses != 0 {
					b.Fatalf("warm start: %+v, want no miss", st)
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("drop", func(b *testing.B) {
		var compact time.Duration
		for b.Loop() {
			b.StopTimer()
			c, clk := setup(b)
			sweep(b, c)
			clk.advance(DefaultUnused + SweepEvery)
			b.StartTimer()
			if n := sweep(b, c); n != len(changed) {
				b.Fatalf("dropped %d, want %d", n, len(changed))
			}
			t := time.Now()
			if err := c.Compact(); err != nil {
				b.Fatal(err)
			}
			compact += time.Since(t)
		}
		b.ReportMetric(float64(compact.Milliseconds())/float64(b.N), "ms/compact")
	})
}

// BenchmarkSearchDuringSweep is what searches see while the day's sweep
// drops the 3,000 old texts of BenchmarkCacheSweep's catalog and the
// compaction after it runs: 4 searchers each embed a query every 5 ms
// (EmbedQueries, as serve does; half of them asked before, half new) from
// the sweep's start to the compaction's end. It reports the longest and
// the 99th percentile search (ms/max-search, ms/p99-search), the longest
// of those that started during the compaction (ms/max-in-compact), the
// longest of as many searches of the same searchers after it
// (ms/max-idle: the machine's own noise), the compaction's time
// (ms/compact) and the store's tables on disk before the sweep and after
// the compaction (KiB-before, KiB-after):
//
//	go test ./embed -run '^$' -bench SearchDuringSweep -benchtime 5x
func BenchmarkSearchDuringSweep(b *testing.B) {
	live, changed := sweepBenchTexts(b)
	ctx := context.Background()
	var during, idle []time.Duration
	var compact, inCompact time.Duration
	var compacting atomic.Bool
	var before, after int64
	// search runs the searchers until stop (nil: never) or, with n > 0,
	// until they made n searches, and returns their latencies.
	search := func(c *Cached, stop <-chan struct{}, n int) []time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		enough := make(chan struct{})
		var once sync.Once
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-enough:
						return
					case <-time.After(5 * time.Millisecond):
					}
					q := fmt.Sprintf("asked before %d", (w*50+i)%200)
					if i%2 == 1 {
						q = fmt.Sprintf("new query %d %d", w, i)
					}
					t, in := time.Now(), compacting.Load()
					if _, err := c.EmbedQueries(ctx, []string{q}); err != nil {
						b.Error(err)
						return
					}
					d := time.Since(t)
					mu.Lock()
					lat = append(lat, d)
					if in {
						inCompact = max(inCompact, d)
					}
					if n > 0 && len(lat) >= n {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return lat
	}
	for b.Loop() {
		b.StopTimer()
		c, clk := sweepBenchCache(b, live, changed, 200)
		dir := c.dir
		if _, err := c.Sweep(ctx, live); err != nil { // the old texts stamped
			b.Fatal(err)
		}
		clk.advance(DefaultUnused + SweepEvery)
		before += tableBytes(b, dir)
		stop := make(chan struct{})
		done := make(chan []time.Duration)
		go func() { done <- search(c, stop, 0) }()
		b.StartTimer()
		if n, err := c.Sweep(ctx, live); err != nil || n != len(changed) {
			b.Fatalf("sweep dropped %d (%v), want %d", n, err, len(changed))
		}
		t1 := time.Now()
		compacting.Store(true)
		if err := c.Compact(); err != nil {
			b.Fatal(err)
		}
		compacting.Store(false)
		compact += time.Since(t1)
		b.StopTimer()
		close(stop)
		got := <-done
		during = append(during, got...)
		after += tableBytes(b, dir)
		idle = append(idle, search(c, nil, len(got))...) // as many searches, the compaction over
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(during)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	b.ReportMetric(ms(slices.Max(during)), "ms/max-search")
	b.ReportMetric(ms(during[len(during)*99/100]), "ms/p99-search")
	b.ReportMetric(ms(inCompact), "ms/max-in-compact")
	b.ReportMetric(ms(slices.Max(idle)), "ms/max-idle")
	b.ReportMetric(float64(len(during))/float64(b.N), "searches/op")
	b.ReportMetric(float64(compact.Milliseconds())/float64(b.N), "ms/compact")
	b.ReportMetric(float64(before>>10)/float64(b.N), "KiB-before")
	b.ReportMetric(float64(after>>10)/float64(b.N), "KiB-after")
}

// Searches do not wait for the compaction after a sweep: at each stage of
// Compact (held there by compactHook), a search whose query was asked
// before, a new one and a tool text's lookup all return, and the store
// still answers them after it. The sweep's deletions are compacted away:
// the dropped text is embedded again when asked.
func TestSearchesDuringCompaction(t *testing.T) {
	c, inner, clk := clockedCache(t)
	ctx := context.Background()
	mustEmbed(t, c, "kept", "gone")
	if _, err := c.EmbedQueries(ctx, []string{"asked before"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sweep(ctx, []string{"kept"}); err != nil { // "gone" stamped
		t.Fatal(err)
	}
	clk.advance(DefaultUnused + SweepEvery)
	if n, err := c.Sweep(ctx, []string{"kept"}); err != nil || n != 1 {
		t.Fatalf("sweep dropped %d (%v), want 1", n, err)
	}
	var stages []string
	c.compactHook = func(stage string) {
		stages = append(stages, stage)
		done := make(chan error, 1)
		go func() {
			_, err := c.EmbedQueries(ctx, []string{"asked before", "new at " + stage})
			if err == nil {
				_, err = c.Embed(ctx, []string{"kept"})
			}
			done <- err
		}()
		if !returned(t, done) {
			t.Errorf("a search waited for the compaction (held at %q)", stage)
		}
	}
	if err := c.Compact(); err != nil {
		t.Fatal(err)
	}
	c.compactHook = nil
	if want := []string{"closed", "flatten"}; !slices.Equal(stages, want) {
		t.Errorf("Compact went through %q, want %q", stages, want)
	}
	before := len(inner.texts())
	if _, err := c.EmbedQueries(ctx, []string{"asked before"}); err != nil {
		t.Fatal(err)
	}
	mustEmbed(t, c, "kept")
	mustEmbed(t, c, "gone")
	if got := inner.texts()[before:]; len(got) != 1 || got[0] != "gone" {
		t.Errorf("after the compaction embedded %q, want only gone", got)
	}
}

// returned waits for done and reports whether it came before the test's
// deadline (go test -timeout), failing the test with its error.
func returned(t *testing.T, done <-chan error) bool {
	t.Helper()
	var deadline <-chan time.Time
	if d, ok := t.Deadline(); ok {
		deadline = time.After(time.Until(d) * 9 / 10)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
		return true
	case <-deadline:
		return false
	}
}

// Close during a compaction waits for it: the store Compact opens again
// is closed too (another cache opens the folder after), at either stage.
func TestCloseDuringCompaction(t *testing.T) {
	for _, at := range []string{"closed", "flatten"} {
		t.Run(at, func(t *testing.T) {
			c, _, _ := clockedCache(t)
			mustEmbed(t, c, "a", "b")
			closed := make(chan error, 1)
			c.compactHook = func(stage string) {
				if stage == at {
					go func() { closed <- c.Close() }()
				}
			}
			if err := c.Compact(); err != nil {
				t.Fatal(err)
			}
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			again, err := NewCached(&fakeModel{id: "fake/a@1", dim: 8}, c.dir, nil)
			if err != nil {
				t.Fatalf("the folder after Close during the compaction: %v", err)
			}
			defer again.Close()
			if got := mustEmbed(t, again, "a"); got[0] == nil || again.Stats().Hits != 1 {
				t.Errorf("the vector stored before the compaction: stats %+v, want a hit", again.Stats())
			}
		})
	}
}
