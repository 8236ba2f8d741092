package embed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/storage/storagetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// fakeModel makes deterministic unit vectors from a hash of the text and
// records what it was asked to embed.
type fakeModel struct {
	id  string
	dim int

	mu    sync.Mutex
	calls int
	seen  []string
}

func (f *fakeModel) ModelID() string { return f.id }
func (f *fakeModel) Dim() int        { return f.dim }

func (f *fakeModel) Embed(_ context.Context, texts []string) ([][]float32, error) {
	f.mu.Lock()
	f.calls++
	f.seen = append(f.seen, texts...)
	f.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = fakeVector(f.id+t, f.dim)
	}
	return out, nil
}

func (f *fakeModel) texts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func fakeVector(s string, dim int) []float32 {
	h := sha256.Sum256([]byte(s))
	v := make([]float32, dim)
	var n float64
	for i := range v {
		v[i] = float32(int(h[i%32])-128) + float32(i%7)
		n += float64(v[i]) * float64(v[i])
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(n))
	}
	return v
}

func mustEmbed(t *testing.T, m Model, texts ...string) [][]float32 {
	t.Helper()
	got, err := m.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCacheHitsAndMisses(t *testing.T) {
	inner := &fakeModel{id: "fake/a@1", dim: 8}
	c, err := NewCached(inner, "", &CacheOptions{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	got := mustEmbed(t, c, "a", "b", "a")
	want := [][]float32{fakeVector("fake/a@1a", 8), fakeVector("fake/a@1b", 8), fakeVector("fake/a@1a", 8)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("vectors (-want +got):\n%s", diff)
	}
	mustEmbed(t, c, "b", "c", "a")
	mustEmbed(t, c, "a", "b", "c")
	if diff := cmp.Diff([]string{"a", "b", "c"}, inner.texts()); diff != "" {
		t.Errorf("inner embedded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(CacheStats{Hits: 5, Misses: 3}, c.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	if inner.calls != 2 {
		t.Errorf("inner called %d times, want 2 (the all-hit call must not reach it)", inner.calls)
	}
}

// TestCacheRestart: a reopened cache re-embeds only unseen text, and a
// different model id never reuses another model's vectors.
func TestCacheRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "embeddings")
	first := &fakeModel{id: "fake/a@1", dim: 8}
	c, err := NewCached(first, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := mustEmbed(t, c, "alpha", "beta")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	second := &fakeModel{id: "fake/a@1", dim: 8}
	c, err = NewCached(second, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	after := mustEmbed(t, c, "alpha", "beta", "gamma")
	if diff := cmp.Diff(before, after[:2]); diff != "" {
		t.Errorf("cached vectors changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gamma"}, second.texts()); diff != "" {
		t.Errorf("after restart inner embedded (-want +got):\n%s", diff)
	}
	c.Close()

	other := &fakeModel{id: "fake/b@2", dim: 8}
	c, err = NewCached(other, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustEmbed(t, c, "alpha")
	if diff := cmp.Diff([]string{"alpha"}, other.texts()); diff != "" {
		t.Errorf("other model embedded (-want +got):\n%s", diff)
	}
}

// TestCacheLazy: with CacheOptions.Lazy the store is opened at the first
// lookup, not by NewCached, nor by Sweep or Compact: until then another
// process may open it (Badger's folder lock is not held), and a cache never
// asked for a vector makes no folder. Once opened it is the store NewCached
// would have opened. serve in bm25 mode opened it at every start, though
// none of its searches reads a vector.
func TestCacheLazy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "embeddings")
	first, err := NewCached(&fakeModel{id: "fake/a@1", dim: 8}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored := mustEmbed(t, first, "alpha")
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	free := func(when string) {
		t.Helper()
		other, err := NewCached(&fakeModel{id: "fake/a@1", dim: 8}, dir, nil)
		if err != nil {
			t.Fatalf("%s: the lazy cache holds its store: %v", when, err)
		}
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
	}

	inner := &fakeModel{id: "fake/a@1", dim: 8}
	c, err := NewCached(inner, dir, &CacheOptions{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	free("after NewCached")
	if n, err := c.Sweep(context.Background(), []string{"alpha"}); n != 0 || err != nil {
		t.Errorf("Sweep before a lookup: %d, %v", n, err)
	}
	if err := c.Compact(); err != nil {
		t.Errorf("Compact before a lookup: %v", err)
	}
	free("after Sweep and Compact")
	got := mustEmbed(t, c, "alpha", "beta")
	if diff := cmp.Diff(stored[0], got[0]); diff != "" {
		t.Errorf("the stored vector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"beta"}, inner.texts()); diff != "" {
		t.Errorf("embedded (-want +got):\n%s", diff)
	}
	if _, err := NewCached(&fakeModel{id: "fake/a@1", dim: 8}, dir, nil); !errors.Is(err, ErrCacheBusy) {
		t.Errorf("the store after a lookup: %v, want it held (ErrCacheBusy)", err)
	}

	never := filepath.Join(t.TempDir(), "embeddings")
	unused, err := NewCached(&fakeModel{id: "fake/a@1", dim: 8}, never, &CacheOptions{Lazy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := unused.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(never); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a lazy cache never asked for a vector made its folder: %v", err)
	}
}

// rawDB writes kv into a Badger store at dir, as another program would.
func rawDB(t *testing.T, dir string, kv map[string]string) {
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		for k, v := range kv {
			if err := txn.Set([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

// TestCacheCorrupt: garbage, a foreign Badger store, another format version
// or another dimension is moved aside with a warning and rebuilt.
func TestCacheCorrupt(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"garbage files", func(t *testing.T, dir string) {
			os.MkdirAll(dir, 0o755)
			for _, f := range []string{"MANIFEST", "000001.vlog", "000001.sst", "KEYREGISTRY"} {
				if err := os.WriteFile(filepath.Join(dir, f), bytes.Repeat([]byte("garbage!"), 512), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"truncated manifest", func(t *testing.T, dir string) {
			rawDB(t, dir, map[string]string{"m/format": cacheFormat})
			if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("Bdg"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"foreign store", func(t *testing.T, dir string) {
			rawDB(t, dir, map[string]string{"user:1": "someone else's data"})
		}},
		{"format version", func(t *testing.T, dir string) {
			rawDB(t, dir, map[string]string{"m/format": "0"}) // a newer one is TestCacheOfNewerToolgateMovedAsideForIt's
		}},
		{"dimension", func(t *testing.T, dir string) {
			rawDB(t, dir, map[string]string{"m/format": cacheFormat, "m/dim/fake/a@1": "4"})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "embeddings")
			tc.setup(t, dir)
			buf := &testenv.LogBuffer{}
			log := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
			inner := &fakeModel{id: "fake/a@1", dim: 8}
			c, err := NewCached(inner, dir, &CacheOptions{Logger: log})
			if err != nil {
				t.Fatalf("NewCached: %v", err)
			}
			defer c.Close()
			got := mustEmbed(t, c, "x")
			if diff := cmp.Diff([][]float32{fakeVector("fake/a@1x", 8)}, got); diff != "" {
				t.Errorf("vector (-want +got):\n%s", diff)
			}
			if !strings.Contains(buf.String(), "moved aside") {
				t.Errorf("no warning logged; log:\n%s", buf.String())
			}
			aside, _ := filepath.Glob(filepath.Join(parent, "embeddings.corrupt-*"))
			if len(aside) != 1 {
				t.Errorf("moved-aside dirs: %v, want 1", aside)
			}
		})
	}
}

// TestCacheBadValue: an entry that is not a unit vector of the right width
// is re-embedded and overwritten.
func TestCacheBadValue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "embeddings")
	inner := &fakeModel{id: "fake/a@1", dim: 8}
	c, err := NewCached(inner, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustEmbed(t, c, "x", "y", "z")
	nan := encodeVector(fakeVector("q", 8))
	copy(nan, encodeVector([]float32{float32(math.NaN())}))
	bad := map[string][]byte{
		"x": []byte("short"),
		"y": nan,
		"z": encodeVector(make([]float32, 8)), // zero vector
	}
	err = c.store.db.Update(func(txn *badger.Txn) error {
		for k, v := range bad {
			if err := txn.Set(c.key(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := mustEmbed(t, c, "x", "y", "z")
	for i, s := range []string{"x", "y", "z"} {
		if diff := cmp.Diff(fakeVector("fake/a@1"+s, 8), got[i]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s, diff)
		}
	}
	mustEmbed(t, c, "x", "y", "z")
	if diff := cmp.Diff(CacheStats{Hits: 3, Misses: 6, Bad: 3}, c.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	c.Close()
}

func TestCacheBusy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "embeddings")
	c, err := NewCached(&fakeModel{id: "f", dim: 4}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = NewCached(&fakeModel{id: "f", dim: 4}, dir, nil)
	if !errors.Is(err, ErrCacheBusy) {
		t.Fatalf("second open: %v, want ErrCacheBusy", err)
	}
	if m, _ := filepath.Glob(dir + ".corrupt-*"); len(m) != 0 {
		t.Errorf("a busy cache was moved aside: %v", m)
	}
}

// TestCacheInMemoryIfUnavailable: with CacheOptions.InMemoryIfUnavailable,
// a store that cannot be had (held by another process, a folder that
// cannot take writes) gives a cache in memory, not a pass-through one: a
// text embedded once is not embedded again (eval's timed searches embedded
// each query again while a gateway held the data folder's cache), and the
// store and the folder are left alone.
func TestCacheInMemoryIfUnavailable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "embeddings")
	holder, err := NewCached(&fakeModel{id: "f", dim: 4}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, tt := range []struct {
		name string
		dir  string
		st   *switchStorage
	}{
		{"held by another process", dir, &switchStorage{}},
		{"folder refuses writes", filepath.Join(t.TempDir(), "e"), &switchStorage{err: errors.New("data folder is on a read-only file system")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inner := &fakeModel{id: "f", dim: 4}
			c, err := NewCached(inner, tt.dir, &CacheOptions{Storage: tt.st, InMemoryIfUnavailable: true, Busy: func(bool) { t.Error("Busy called") }})
			if err != nil {
				t.Fatalf("NewCached: %v, want a cache in memory", err)
			}
			mustEmbed(t, c, "alpha", "beta")
			mustEmbed(t, c, "alpha")
			if _, err := c.EmbedQueries(context.Background(), []string{"gamma"}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.EmbedQueries(context.Background(), []string{"gamma"}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, inner.texts()); diff != "" {
				t.Errorf("embedded (-want +got): %s; each text once", diff)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if tt.st.fails != 0 {
				t.Errorf("%d storage faults reported, want none", tt.st.fails)
			}
		})
	}
	mustEmbed(t, holder, "delta") // the holder's store still works
}

// TestCacheBusyTakesOver: with CacheOptions.Busy, a store another process
// holds (another gateway on the data folder) is no error and no storage
// fault: the cache embeds without storing, and takes the store over once the
// other lets it go, finding what that one stored. It used to stay without
// the cache until it restarted.
func TestCacheBusyTakesOver(t *testing.T) {
	defer func(d time.Duration) { refusedRetry = d }(refusedRetry)
	refusedRetry = time.Hour
	dir := filepath.Join(t.TempDir(), "embeddings")
	holder, err := NewCached(&fakeModel{id: "f", dim: 4}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustEmbed(t, holder, "alpha")

	var mu sync.Mutex
	var said []bool
	st := &switchStorage{}
	inner := &fakeModel{id: "f", dim: 4}
	c, err := NewCached(inner, dir, &CacheOptions{Storage: st, Busy: func(busy bool) {
		mu.Lock()
		said = append(said, busy)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatalf("NewCached of a held store with Busy: %v, want a pass-through cache", err)
	}
	defer c.Close()
	busyNow := func() []bool { mu.Lock(); defer mu.Unlock(); return slices.Clone(said) }
	mustEmbed(t, c, "alpha")
	refusedRetry = 0
	mustEmbed(t, c, "beta") // tries the store again: still held
	refusedRetry = time.Hour
	if diff := cmp.Diff([]bool{true}, busyNow()); diff != "" {
		t.Errorf("Busy while held (-want +got): %s", diff)
	}
	if st.fails != 0 || c.Stats().Skipped != 2 {
		t.Errorf("while held: %d storage faults (want none), %d vectors skipped (want 2)", st.fails, c.Stats().Skipped)
	}

	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	// Not tried again at every write: each try would cost a search an
	// open of the store.
	mustEmbed(t, c, "gamma")
	if diff := cmp.Diff([]bool{true}, busyNow()); diff != "" {
		t.Errorf("Busy within refusedRetry of the last try (-want +got): %s", diff)
	}
	refusedRetry = 0
	mustEmbed(t, c, "delta") // stores, taking the store over
	if diff := cmp.Diff([]bool{true, false}, busyNow()); diff != "" {
		t.Errorf("Busy once let go (-want +got): %s", diff)
	}
	mustEmbed(t, c, "alpha", "delta")
	if diff := cmp.Diff([]string{"alpha", "beta", "gamma", "delta"}, inner.texts()); diff != "" {
		t.Errorf("embedded (-want +got): %s; alpha (the holder's) and delta were in the store once taken over", diff)
	}
	if st.fails != 0 {
		t.Errorf("%d storage faults, want none", st.fails)
	}
}

// TestCacheConcurrent: parallel callers (run with -race).
func TestCacheConcurrent(t *testing.T) {
	inner := &fakeModel{id: "fake/a@1", dim: 16}
	c, err := NewCached(inner, filepath.Join(t.TempDir(), "e"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			texts := []string{"a", "b", "c", string(rune('d' + g))}
			got, err := c.Embed(context.Background(), texts)
			if err != nil {
				t.Error(err)
				return
			}
			for i, s := range texts {
				if diff := cmp.Diff(fakeVector("fake/a@1"+s, 16), got[i]); diff != "" {
					t.Errorf("%s: %s", s, diff)
				}
			}
		}()
	}
	wg.Wait()
}

// TestCachedRealModel: the cache in front of the real embedder returns the
// same vectors as the embedder.
func TestCachedRealModel(t *testing.T) {
	e := testEmbedder(t, FP32)
	c, err := NewCached(e, filepath.Join(t.TempDir(), "e"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	texts := benchTexts(5)
	want := mustEmbed(t, e, texts...)
	mustEmbed(t, c, texts...)
	got := mustEmbed(t, c, texts...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cached vectors differ (-want +got):\n%s", diff)
	}
	if s := c.Stats(); s.Hits != 5 || s.Misses != 5 {
		t.Errorf("stats %+v", s)
	}
}

// BenchmarkCachedQuery is what the embedding cache adds to a search_tools
// query in serve (the engine embeds queries through it): a lookup, and on a
// miss the write of the new vector, around a model that answers at once.
//
//	go test ./embed -run '^$' -bench CachedQuery
func BenchmarkCachedQuery(b *testing.B) {
	c, err := NewCached(&fakeModel{id: "fake", dim: 384}, b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, run := range []string{"miss", "hit"} {
		b.Run(run, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := c.Embed(ctx, []string{fmt.Sprintf("query number %d", i)}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// closeWithin closes c in the background and fails t if Close has not
// returned after a generous bound (a hang is the bug this guards against,
// not a speed).
func closeWithin(t *testing.T, c *Cached) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(testenv.Timeout):
		t.Fatal("Close did not return: it waits for a flush that cannot happen")
		return nil
	}
}

// dataFolder makes a data folder (<tmp>/data), its health, the cache's
// writer there and the log they write to.
func dataFolder(t *testing.T) (string, *storage.Health, *storage.Writer, *testenv.LogBuffer) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	logs := &testenv.LogBuffer{}
	h := storage.New(data, &storage.Options{Logger: logs.Logger()})
	if err := h.Prepare(); err != nil {
		t.Fatal(err)
	}
	return data, h, h.Writer("embedding cache", "searches embed without storing new vectors"), logs
}

// TestCacheFolderRemoved removes the data folder under an open cache that
// holds unflushed entries: searches still embed (cached vectors are still
// read, new ones are not stored), the fault is reported once, Close does
// not hang, and once the folder is back a new store is opened there.
func TestCacheFolderRemoved(t *testing.T) {
	for _, fault := range []string{"removed", "replaced by a file"} {
		t.Run(fault, func(t *testing.T) {
			data, h, w, logs := dataFolder(t)
			inner := &fakeModel{id: "fake/a@1", dim: 8}
			c, err := NewCached(inner, filepath.Join(data, "cache", "embeddings"), &CacheOptions{Logger: logs.Logger(), Storage: w})
			if err != nil {
				t.Fatal(err)
			}
			mustEmbed(t, c, "a")

			if err := os.RemoveAll(data); err != nil {
				t.Fatal(err)
			}
			if fault == "replaced by a file" {
				if err := os.WriteFile(data, []byte("not a folder"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 20 {
				got := mustEmbed(t, c, "a", fmt.Sprintf("new %d", i))
				if diff := cmp.Diff([][]float32{fakeVector("fake/a@1a", 8), fakeVector(fmt.Sprintf("fake/a@1new %d", i), 8)}, got); diff != "" {
					t.Fatalf("vectors while the folder is %s (-want +got):\n%s", fault, diff)
				}
			}
			if s := c.Stats(); s.Skipped != 20 || s.Hits != 20 {
				t.Errorf("stats %+v, want 20 hits (read from the open store) and 20 skipped writes", s)
			}
			if r := h.Report(); r.Writable || r.Writers[0].OK || r.Writers[0].Failures < 20 {
				t.Errorf("storage report %+v, want the cache failing", r)
			}
			if n := strings.Count(logs.String(), "storage fault:"); n != 1 {
				t.Errorf("%d fault lines, want 1:\n%s", n, logs.String())
			}

			// The folder comes back: the next write opens a new store there.
			if err := os.RemoveAll(data); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(data, 0o755); err != nil {
				t.Fatal(err)
			}
			mustEmbed(t, c, "b")
			if w.Failing() || c.setAside != 1 {
				t.Fatalf("after the folder is back: failing=%v setAside=%d, want a new store", w.Failing(), c.setAside)
			}
			before := len(inner.texts())
			mustEmbed(t, c, "b")
			if len(inner.texts()) != before {
				t.Error("b was not stored in the new store")
			}
			if err := closeWithin(t, c); err != nil {
				t.Fatalf("Close of the new store: %v", err)
			}
		})
	}
}

// TestCacheFolderRemovedAfterCheck: the data folder is removed between
// the check before a write and the write (an rm -rf under way). The cache
// must not make the data folder again to open a new store there; it keeps
// the old store (refused for writes), reports the fault, and Close says
// what could not be flushed.
func TestCacheFolderRemovedAfterCheck(t *testing.T) {
	data, h, w, logs := dataFolder(t)
	c, err := NewCached(&fakeModel{id: "fake/a@1", dim: 8}, filepath.Join(data, "cache", "embeddings"), &CacheOptions{Logger: logs.Logger(), Storage: storagetest.CheckedBefore(w)})
	if err != nil {
		t.Fatal(err)
	}
	mustEmbed(t, c, "a")
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		mustEmbed(t, c, fmt.Sprintf("new %d", i))
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the cache made the removed data folder again (%v)", err)
	}
	if r := h.Report(); r.Writers[0].OK || !strings.Contains(r.Writers[0].Error, "does not exist") {
		t.Errorf("storage report %+v, want the cache failing for the removed folder", r)
	}
	if c.setAside != 0 || strings.Contains(logs.String(), "started a new cache") {
		t.Errorf("a new store was opened (set aside %d):\n%s", c.setAside, logs.String())
	}
	err = closeWithin(t, c)
	if err == nil || !strings.Contains(err.Error(), "left unclosed") {
		t.Fatalf("Close = %v, want it to say the store was left unclosed", err)
	}
}

// TestCacheCloseUnwritable: Close of a store whose folder cannot take the
// flush returns at once with an error that says so.
func TestCacheCloseUnwritable(t *testing.T) {
	data := t.TempDir()
	c, err := NewCached(&fakeModel{id: "f", dim: 4}, filepath.Join(data, "e"), nil)
	if err != nil {
		t.Fatal(err)
	}
	mustEmbed(t, c, "held in the memtable")
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	err = closeWithin(t, c)
	if err == nil || !strings.Contains(err.Error(), "left unclosed") || !strings.Contains(err.Error(), "may be lost") {
		t.Fatalf("Close = %v, want it to say the store was left unclosed", err)
	}
}

// switchStorage is a Storage whose answer the test sets.
type switchStorage struct {
	storage.OSMkdir
	mu       sync.Mutex
	err      error
	fails    int
	oks      int
	lastFail error
}

func (s *switchStorage) set(err error) { s.mu.Lock(); s.err = err; s.mu.Unlock() }
func (s *switchStorage) Check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
func (s *switchStorage) Fail(err error) { s.mu.Lock(); s.fails++; s.lastFail = err; s.mu.Unlock() }
func (s *switchStorage) OK()            { s.mu.Lock(); s.oks++; s.mu.Unlock() }

// TestCachePassThroughFromStart: a cache opened while the folder cannot
// take writes embeds without storing, and stores once it can.
func TestCachePassThroughFromStart(t *testing.T) {
	st := &switchStorage{err: errors.New("data folder is on a full file system")}
	dir := filepath.Join(t.TempDir(), "e")
	inner := &fakeModel{id: "f", dim: 4}
	c, err := NewCached(inner, dir, &CacheOptions{Storage: st})
	if err != nil {
		t.Fatalf("NewCached on a full folder: %v, want a pass-through cache", err)
	}
	mustEmbed(t, c, "x")
	mustEmbed(t, c, "x")
	if s := c.Stats(); s.Skipped != 2 || s.Hits != 0 {
		t.Fatalf("stats %+v, want 2 skipped", s)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("the cache wrote its folder while storage refused")
	}
	st.set(nil)
	mustEmbed(t, c, "x")
	mustEmbed(t, c, "x")
	if s := c.Stats(); s.Hits != 1 || st.oks != 1 {
		t.Fatalf("after the folder can take writes: stats %+v, OK reports %d", s, st.oks)
	}
	st.set(errors.New("full again"))
	if err := closeWithin(t, c); err == nil || !strings.Contains(err.Error(), "full again") {
		t.Fatalf("Close on a full folder = %v, want left unclosed with the reason", err)
	}
}

// queryTTLCache is a cache on disk whose query vectors expire after an
// hour, over a fake model; it is closed when the test ends.
func queryTTLCache(t *testing.T) (*Cached, *fakeModel) {
	t.Helper()
	inner := &fakeModel{id: "fake/a@1", dim: 8}
	c, err := NewCached(inner, t.TempDir(), &CacheOptions{QueryTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, inner
}

// TestCacheQueryTTL: the vectors EmbedQueries stores expire after
// QueryTTL (Badger's per-entry expiry: an expired entry is a miss and is
// embedded again), the tools' texts (Embed) never; a query that is a
// tool's text reads that text's vector and leaves it as it is.
func TestCacheQueryTTL(t *testing.T) {
	c, inner := queryTTLCache(t)
	ctx := context.Background()
	expiresAt := func(text string) uint64 {
		t.Helper()
		var at uint64
		if err := c.store.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(c.key(text))
			if errors.Is(err, badger.ErrKeyNotFound) {
				item, err = txn.Get(queryKey(c.key(text)))
			}
			if err != nil {
				return err
			}
			at = item.ExpiresAt()
			return nil
		}); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		return at
	}

	before := uint64(time.Now().Add(time.Hour).Unix())
	if _, err := c.EmbedQueries(ctx, []string{"a query"}); err != nil {
		t.Fatal(err)
	}
	after := uint64(time.Now().Add(time.Hour).Unix())
	mustEmbed(t, c, "a tool's text")
	if at := expiresAt("a query"); at < before || at > after {
		t.Errorf("the query's vector expires at %d, want an hour from now (%d–%d)", at, before, after)
	}
	if at := expiresAt("a tool's text"); at != 0 {
		t.Errorf("the tool text's vector expires at %d, want never (0)", at)
	}

	// A query asked again before it expires is a hit; a tool's text asked
	// as a query is a hit and keeps its vector for good.
	if _, err := c.EmbedQueries(ctx, []string{"a query", "a tool's text"}); err != nil {
		t.Fatal(err)
	}
	if at := expiresAt("a tool's text"); at != 0 {
		t.Errorf("asked as a query, the tool text's vector now expires at %d", at)
	}
	if diff := cmp.Diff(CacheStats{Hits: 2, Misses: 2}, c.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}

	// Once expired, the query is embedded again.
	if err := c.store.db.Update(func(txn *badger.Txn) error {
		e := badger.NewEntry(queryKey(c.key("a query")), encodeVector(fakeVector("fake/a@1a query", 8)))
		e.ExpiresAt = uint64(time.Now().Add(-time.Second).Unix())
		return txn.SetEntry(e)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EmbedQueries(ctx, []string{"a query"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a query", "a tool's text", "a query"}, inner.texts()); diff != "" {
		t.Errorf("inner embedded (-want +got):\n%s", diff)
	}
	if at := expiresAt("a query"); at < before {
		t.Errorf("the query embedded again expires at %d, want an hour from now", at)
	}

	d, err := NewCached(inner, "", &CacheOptions{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.queryTTL != DefaultQueryTTL {
		t.Errorf("default query TTL %v, want %v", d.queryTTL, DefaultQueryTTL)
	}
}

// TestCacheQueriesApart: the vectors EmbedQueries stores (they expire) are
// kept in a key range of their own, after every vector of the tools' texts
// (which never expire): the keys are hashes, so in one range each table of
// new query vectors overlapped all the tools' tables, and each compaction
// of a few query vectors rewrote the whole catalog's (serve's heap went
// from 40 to 150 MB while one ran, at 10,000 tools). The cache is still one
// set of texts: a query finds a tool text's vector, a tool text a query's,
// and a query stored under the tools' keys by an older toolgate is found.
func TestCacheQueriesApart(t *testing.T) {
	c, inner := queryTTLCache(t)
	ctx := context.Background()
	var tools, queries []string
	for i := range 200 {
		tools = append(tools, fmt.Sprintf("tool text %d", i))
		queries = append(queries, fmt.Sprintf("query %d", i))
	}
	mustEmbed(t, c, tools...)
	if _, err := c.EmbedQueries(ctx, queries); err != nil {
		t.Fatal(err)
	}

	// Every key that expires sorts after every vector key that does not.
	var lastForever, firstExpiring []byte
	if err := c.store.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.KeyCopy(nil)
			switch {
			case item.ExpiresAt() != 0 && firstExpiring == nil:
				firstExpiring = k
			case item.ExpiresAt() == 0 && k[0] == keyVecPfx:
				lastForever = k
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if firstExpiring == nil || lastForever == nil {
		t.Fatalf("want both kinds of vector stored; first expiring %x, last for good %x", firstExpiring, lastForever)
	}
	if bytes.Compare(firstExpiring, lastForever) <= 0 {
		t.Errorf("a query's vector (key %x) sorts before a tool text's (key %x): the two are interleaved", firstExpiring, lastForever)
	}

	// One set of texts: a tool text asked as a query, a query indexed as a
	// tool's text, and a query an older toolgate stored with the tools.
	old := "a query stored by an older toolgate"
	if err := c.store.db.Update(func(txn *badger.Txn) error {
		return txn.SetEntry(badger.NewEntry(c.key(old), encodeVector(fakeVector("fake/a@1"+old, 8))).WithTTL(time.Hour))
	}); err != nil {
		t.Fatal(err)
	}
	before := len(inner.texts())
	got, err := c.EmbedQueries(ctx, []string{tools[0], old})
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, mustEmbed(t, c, queries[0])...)
	want := [][]float32{fakeVector("fake/a@1"+tools[0], 8), fakeVector("fake/a@1"+old, 8), fakeVector("fake/a@1"+queries[0], 8)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("vectors (-want +got):\n%s", diff)
	}
	if n := len(inner.texts()) - before; n != 0 {
		t.Errorf("the model embedded %d texts the cache held: %q", n, inner.texts()[before:])
	}
}

// TestCacheOutOfDescriptors: a cache that cannot be opened because the
// process has no descriptor left is not corrupt: it is not moved aside (it
// used to be, its vectors lost, under ulimit -n 16), the fault is
// reported, searches embed without it, and it is opened at a write once
// descriptors are free (at most one try every 10 s), with the vectors it
// held.
func TestCacheOutOfDescriptors(t *testing.T) {
	checkRefusedOpen(t, "descriptors are free", func(_ string, open func()) {
		release := testenv.FillDescriptors(t)
		open()
		release()
	}, func(_ string, fail error) bool { return strings.Contains(fail.Error(), "too many open files") })
}

// checkRefusedOpen checks a cache that something other than damage keeps
// Badger from opening (a limit, files of another user): a cache holding
// "alpha", opened by under's open while that lasts, is pass-through, not
// moved aside (it used to be, its vectors lost), its fault reported as
// reported says; once it is over (when under returns: until), it opens
// at its next write with the vectors it held.
func checkRefusedOpen(t *testing.T, until string, under func(dir string, open func()), reported func(dir string, fail error) bool) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "embeddings")
	c, err := NewCached(&fakeModel{id: "f", dim: 4}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustEmbed(t, c, "alpha")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	defer func(d time.Duration) { refusedRetry = d }(refusedRetry)
	refusedRetry = 0
	st := &switchStorage{}
	inner := &fakeModel{id: "f", dim: 4}
	under(dir, func() { c, err = NewCached(inner, dir, &CacheOptions{Storage: st}) })
	if err != nil {
		t.Fatalf("NewCached: %v, want a pass-through cache", err)
	}
	defer c.Close()
	if aside, _ := filepath.Glob(dir + ".corrupt-*"); len(aside) > 0 {
		t.Fatalf("the cache was moved aside as corrupt: %v", aside)
	}
	if st.fails == 0 || !reported(dir, st.lastFail) {
		t.Errorf("the fault is not reported as it should: %d failures, last %v", st.fails, st.lastFail)
	}
	mustEmbed(t, c, "beta") // stores, opening the cache
	if aside, _ := filepath.Glob(dir + ".corrupt-*"); len(aside) > 0 {
		t.Fatalf("the cache was moved aside as corrupt once %s: %v", until, aside)
	}
	mustEmbed(t, c, "alpha", "beta")
	if diff := cmp.Diff([]string{"beta"}, inner.texts()); diff != "" {
		t.Errorf("embedded once %s (-want +got): %s; alpha was in the cache", until, diff)
	}
}

// TestCacheOverFileSizeLimit: a file-size limit (ulimit -f, LimitFSIZE=)
// that Badger's memtable outgrows is a limit, not damage: the cache is
// pass-through, its fault names the limit, and it opens once the limit
// allows. It was moved aside as corrupt (its vectors lost), a new
// .corrupt-… folder every start.
func TestCacheOverFileSizeLimit(t *testing.T) {
	checkRefusedOpen(t, "the limit allows (the memtable file it kept empty)", func(_ string, open func()) {
		// Far below a memtable: Badger cannot size its first one.
		testenv.WithFileSizeLimit(t, 64<<10, open)
	}, func(dir string, fail error) bool {
		return storage.Shortage(fail) == syscall.EFBIG && strings.Contains(storage.Fix(dir, fail), "raise its file-size limit")
	})
}

// lateModel is a model whose files arrive after the cache is opened (see
// Options.Background): its ID is "" and Embed fails until they have; during
// runs inside Embed, before it answers.
type lateModel struct {
	fakeModel
	arrived atomic.Bool
	during  func()
}

func (l *lateModel) ModelID() string {
	if l.arrived.Load() {
		return l.fakeModel.id
	}
	return ""
}

func (l *lateModel) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if l.during != nil {
		l.during()
	}
	if !l.arrived.Load() {
		return nil, errors.New("model file not found")
	}
	return l.fakeModel.Embed(ctx, texts)
}

// TestCacheModelArrives: a cache opened on a model not installed yet passes
// its errors on, stores nothing meanwhile, and once the files arrive keys
// vectors by the model's ID, so a cache reopened on that model finds them.
// A vector made while the model arrived (its keys computed with the ID
// "") is not stored.
func TestCacheModelArrives(t *testing.T) {
	dir := t.TempDir()
	late := &lateModel{fakeModel: fakeModel{id: "fake/late@1", dim: 8}}
	c, err := NewCached(late, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id := c.ModelID(); id != "" {
		t.Errorf("ModelID before the files = %q", id)
	}
	if _, err := c.Embed(context.Background(), []string{"a"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("Embed before the files: %v, want the model's error", err)
	}
	late.during = func() { late.arrived.Store(true) }
	if got := mustEmbed(t, c, "a"); !slices.Equal(got[0], fakeVector("fake/late@1a", 8)) {
		t.Errorf("the vector made as the files arrived: %v", got[0])
	}
	late.during = nil
	mustEmbed(t, c, "a", "b") // "a" again: it was not stored under ""
	mustEmbed(t, c, "a", "b")
	if diff := cmp.Diff([]string{"a", "a", "b"}, late.texts()); diff != "" {
		t.Errorf("embedded (-want +got):\n%s", diff)
	}
	if id := c.ModelID(); id != "fake/late@1" {
		t.Errorf("ModelID after the files = %q", id)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	same := &fakeModel{id: "fake/late@1", dim: 8}
	c, err = NewCached(same, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustEmbed(t, c, "a", "b")
	if n := len(same.texts()); n != 0 {
		t.Errorf("the reopened cache embedded %v again", same.texts())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Opened again before a model's files: nothing was stored under "".
	c, err = NewCached(&lateModel{fakeModel: fakeModel{id: "fake/other@2", dim: 8}}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, err := c.Embed(context.Background(), []string{"a"}); err == nil {
		t.Errorf("a cache of a model not installed answered %v from what an earlier model stored", v)
	}
}

// TestCacheCompact: after a bulk of vectors (an index build) the store
// holds level-0 tables (with more vectors, an over-target level too) and
// vectors still in its memtable; Compact leaves
// every table in one level below level 0, the memtable written out, and
// every vector readable. It checks what Badger does (Close writes the
// memtable out, DB.Flatten consolidates into one level): a Badger upgrade
// that changes either fails here.
func TestCacheCompact(t *testing.T) {
	dir := t.TempDir()
	inner := &fakeModel{id: "fake/a@1", dim: 384}
	c, err := NewCached(inner, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var texts []string
	for i := range 6000 {
		texts = append(texts, fmt.Sprintf("tool text %d", i))
	}
	for b := range slices.Chunk(texts, 64) { // as index.Build embeds: in batches
		mustEmbed(t, c, b...)
	}
	levels := func() (used []int, l0 int) {
		for _, l := range c.store.db.Levels() {
			if l.NumTables > 0 {
				used = append(used, l.Level)
			}
			if l.Level == 0 {
				l0 = l.NumTables
			}
		}
		return used, l0
	}
	used, l0 := levels()
	if l0 == 0 {
		t.Fatalf("before Compact the store holds tables in levels %v, none at level 0: want the state a build leaves (a change of Badger's options or compactions?)", used)
	}
	if err := c.Compact(); err != nil {
		t.Fatal(err)
	}
	used, l0 = levels()
	if len(used) != 1 || l0 != 0 {
		t.Fatalf("after Compact the store holds tables in levels %v (%d at level 0), want exactly one level below 0: has Badger's Close (memtable written out) or DB.Flatten changed?", used, l0)
	}
	var inTables int64
	for _, ti := range c.store.db.Tables() {
		inTables += int64(ti.KeyCount)
	}
	if inTables < int64(len(texts)) {
		t.Errorf("the tables hold %d keys after Compact, want at least the %d vectors: the memtable was not written out", inTables, len(texts))
	}
	before := len(inner.texts())
	got := mustEmbed(t, c, texts...)
	if n := len(inner.texts()) - before; n != 0 {
		t.Errorf("after Compact the model embedded %d texts the cache held", n)
	}
	if diff := cmp.Diff(fakeVector("fake/a@1"+texts[4321], 384), got[4321]); diff != "" {
		t.Errorf("vector after Compact (-want +got):\n%s", diff)
	}
	// Writes go on into the store opened again.
	mustEmbed(t, c, "one more text")
	if st := c.Stats(); st.Skipped != 0 {
		t.Errorf("%d vectors skipped after Compact, want them stored", st.Skipped)
	}
}

// A cache a newer toolgate wrote (a rollback) is moved aside as that, for
// the newer toolgate to have back, and an empty one started: it was
// called "not a toolgate embedding cache" and moved to .corrupt-….
func TestCacheOfNewerToolgateMovedAsideForIt(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "embeddings")
	rawDB(t, dir, map[string]string{"m/format": "2"})
	buf := &testenv.LogBuffer{}
	c, err := NewCached(&fakeModel{id: "fake/a@1", dim: 8}, dir, &CacheOptions{Logger: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatalf("NewCached: %v", err)
	}
	defer c.Close()
	mustEmbed(t, c, "x")
	if !strings.Contains(buf.String(), "was written by a newer toolgate (format 2; this one reads format 1)") || !strings.Contains(buf.String(), "moved aside (kept for it)") || strings.Contains(buf.String(), "not a toolgate") {
		t.Errorf("log:\n%s", buf)
	}
	if aside, _ := filepath.Glob(filepath.Join(parent, "embeddings.newer-*")); len(aside) != 1 {
		t.Errorf("moved aside as %v, want one embeddings.newer-…", aside)
	}
}

// TestCacheQueryStoresBounded: EmbedQueries stores at most
// CacheOptions.QueryStoresPerDay new query vectors a day (a burst of a
// tenth of it at once); the queries past it are embedded and answered,
// not stored, and are stored again as the day's allowance comes back. An
// API key within its rate (46 distinct queries a second) stored every one:
// 2.4 MB of cache per 1,500, 6.4 GB a day for the queries' 7 days.
func TestCacheQueryStoresBounded(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	inner := &fakeModel{id: "fake/a@1", dim: 8}
	c, err := NewCached(inner, t.TempDir(), &CacheOptions{QueryStoresPerDay: 100, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	queries := func(from, n int) []string {
		var q []string
		for i := range n {
			q = append(q, fmt.Sprintf("query %d", from+i))
		}
		return q
	}
	stored := func() int {
		n := 0
		if err := c.store.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{keyQueryPfx}})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				n++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	got, err := c.EmbedQueries(ctx, queries(0, 50))
	if err != nil || len(got) != 50 || got[49] == nil {
		t.Fatalf("50 queries: %d vectors, %v", len(got), err)
	}
	if n := stored(); n != 10 {
		t.Errorf("%d query vectors stored of 50 asked at once, want the burst of 10", n)
	}
	now = now.Add(12 * time.Hour) // half a day: the allowance is back to its burst
	if _, err := c.EmbedQueries(ctx, queries(50, 50)); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 20 {
		t.Errorf("%d query vectors stored, want 20", n)
	}
	// Tools' texts are not limited.
	mustEmbed(t, c, queries(100, 30)...)
	if s := c.Stats(); s.Misses != 130 {
		t.Errorf("stats %+v", s)
	}

	// Known queries (learned pairs', eval's) are stored outside the
	// bound, and spend none of it.
	if _, err := c.EmbedKnownQueries(ctx, queries(200, 50)); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 70 {
		t.Errorf("%d query vectors stored after 50 known queries, want 70", n)
	}
	now = now.Add(12 * time.Hour)
	if _, err := c.EmbedQueries(ctx, queries(300, 50)); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 80 {
		t.Errorf("%d query vectors stored, want 80: the known queries spent the allowance", n)
	}
}

// EmbedCounted says how many distinct texts the model embedded, the others
// answered by the cache: what an index build logs as by_model.
func TestCacheEmbedCounted(t *testing.T) {
	inner := &fakeModel{id: "fake/a@1", dim: 8}
	c, err := NewCached(inner, "", &CacheOptions{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		texts []string
		model int
	}{
		{[]string{"a", "b", "a"}, 2},
		{[]string{"b", "c", "a"}, 1},
		{[]string{"a", "b", "c"}, 0},
	} {
		got, n, err := c.EmbedCounted(context.Background(), tc.texts)
		if err != nil || len(got) != len(tc.texts) || n != tc.model {
			t.Errorf("EmbedCounted(%q) = %d vectors, %d by the model, %v; want %d, %d", tc.texts, len(got), n, err, len(tc.texts), tc.model)
		}
	}
}
