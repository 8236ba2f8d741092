package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/storage/storagetest"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// runApple is the fixture most tests start from, running: one server "a"
// whose one tool is "apple", its index in dir.
func runApple(t *testing.T, dir string, opts *Options) (*fixture, *fakePool) {
	t.Helper()
	pool := newFakePool("a")
	pool.list("a", "apple")
	f := newFixture(t, dir, pool, opts, "a")
	f.run(t)
	return f, pool
}

// newFixture writes a config of servers, and prepares a Loop on it over
// pool with the index in dir (nothing runs yet). opts may set anything but
// the logger and the config; the loop is closed when the test ends.
func newFixture(t *testing.T, dir string, pool *fakePool, opts *Options, servers ...string) *fixture {
	t.Helper()
	return newFixtureAt(t, filepath.Join(t.TempDir(), "toolgate.json"), dir, pool, opts, servers...)
}

// newFixtureAt is newFixture with the config file at path.
func newFixtureAt(t *testing.T, path, dir string, pool *fakePool, opts *Options, servers ...string) *fixture {
	t.Helper()
	data := configBytes(t, nil, servers...)
	writeFile(t, path, data)
	cfg, err := config.Parse(data, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	logs := &testenv.LogBuffer{}
	o.Logger = logs.Logger()
	o.ConfigPaths, o.ConfigDocs = []string{path}, []config.Doc{{Path: path, Data: data}}
	if o.Search == nil && o.Embedder == nil {
		o.Search = &search.Options{Mode: search.ModeBM25}
	} else if o.Search == nil { // its vectors are read: built
		o.Search = &search.Options{Mode: search.ModeHybrid}
	}
	l := New(dir, cfg, &o)
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &fixture{loop: l, pool: pool, path: path, logs: logs}
}

// run starts the loop (and fails the test if it cannot).
func (f *fixture) run(t *testing.T) {
	t.Helper()
	if err := f.loop.Run(context.Background(), f.pool); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// find returns the IDs search_tools would show a caller without profile
// for query: the policy's filter applied.
func (f *fixture) find(t *testing.T, query string, limit int) []string {
	t.Helper()
	res, err := f.loop.Search(context.Background(), search.Query{Text: query, Limit: limit, Filter: f.loop.Policy().Filter(nil)})
	if err != nil {
		t.Fatalf("Search(%q): %v", query, err)
	}
	return hitIDs(res)
}

func hitIDs(res search.Result) []string {
	var ids []string
	for _, h := range res.Hits {
		ids = append(ids, h.Tool.ID())
	}
	return ids
}

// A cold start lists every backend before answering; a tool list change
// is indexed off to the side and counted by the catalog generation.
func TestColdStartAndToolsChanged(t *testing.T) {
	pool := newFakePool("a", "b")
	pool.list("a", "apple", "apricot")
	pool.list("b", "banana")
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond}, "a", "b")
	pool.onStart = func() { f.loop.ToolsChanged("a", nil) } // a first listing
	if f.loop.Warm() {
		t.Fatal("Warm() with an empty index folder")
	}
	if _, err := f.loop.Search(context.Background(), search.Query{Text: "apple"}); err == nil {
		t.Error("Search before Run: no error")
	}
	if g := f.loop.CatalogGeneration(); g != 0 {
		t.Errorf("CatalogGeneration() = %d before Run, want 0: nothing to keep a view of", g)
	}
	f.run(t)
	if pool.started != "Start" {
		t.Errorf("pool started with %q, want Start (no warm index)", pool.started)
	}
	st := f.loop.Stats()
	if st.CatalogGeneration != 1 || st.CatalogTools != 3 || st.Reindexing || f.loop.CatalogGeneration() != 1 {
		t.Errorf("after Run: %+v (CatalogGeneration() %d), want generation 1 with 3 tools, in step", st, f.loop.CatalogGeneration())
	}
	// A caller's view of the catalog (kept by its generation) sees the change below.
	if n := f.loop.Policy().Sight(nil, f.loop).Tools("b"); n != 1 {
		t.Errorf("the view of b holds %d tools, want 1", n)
	}
	if got := f.find(t, "banana", 1); !slices.Equal(got, []string{"b__banana"}) {
		t.Errorf("search banana = %v", got)
	}
	if !f.loop.Cataloged("a") || f.loop.Cataloged("zzz") {
		t.Error("Cataloged: want a, not zzz")
	}

	// The start's listings are in the first index: the next generation is
	// this change's, not a rebuild of the same catalog.
	pool.list("b", "banana", "blueberry")
	f.loop.ToolsChanged("b", nil)
	st = f.wait(t, "the re-index", func(s Stats) bool { return s.CatalogGeneration >= 2 })
	if st.CatalogGeneration != 2 || st.CatalogTools != 4 || st.LastIndexError != "" || st.Reindexing {
		t.Errorf("after the change: %+v, want generation 2 with 4 tools, in step", st)
	}
	if got := f.find(t, "blueberry", 1); !slices.Equal(got, []string{"b__blueberry"}) {
		t.Errorf("search blueberry after the change = %v", got)
	}
	if n := f.loop.Policy().Sight(nil, f.loop).Tools("b"); n != 2 {
		t.Errorf("the view of b after the change holds %d tools, want 2", n)
	}
	if !strings.Contains(f.logs.String(), `msg="index ready" tools=4`) {
		t.Errorf("no index ready line:\n%s", f.logs)
	}
}

// A warm start answers from the last run's index while backends connect,
// keeps the tools of servers that have not listed yet, and refuses an index
// that does not fit the config.
func TestWarmStart(t *testing.T) {
	dir := t.TempDir()
	emb := &fakeEmbedder{model: "m1"}
	lastRun(t, dir, emb)

	t.Run("same catalog", func(t *testing.T) {
		// Every backend lists what the last run indexed: the index served
		// stays (no second copy opened, no new generation), and the hook
		// still runs (a first listing can say what a server is).
		pool := newFakePool("a", "b")
		f := newFixture(t, dir, pool, &Options{Embedder: emb, Debounce: time.Millisecond}, "a", "b")
		var hooked atomic.Int32
		f.loop.OnChange(func() { hooked.Add(1) })
		f.run(t)
		pool.list("a", "apple")
		pool.list("b", "banana")
		f.loop.ToolsChanged("a", nil)
		testenv.Eventually(t, "the hook after the listing", func() bool { return hooked.Load() == 1 })
		st := f.wait(t, "the settled loop", func(s Stats) bool { return !s.Reindexing })
		if st.CatalogGeneration != 1 || st.CatalogTools != 2 || st.LastIndexError != "" {
			t.Errorf("after listing the same catalog: %+v, want generation 1 (the warm index) with 2 tools", st)
		}
		if strings.Contains(f.logs.String(), "index ready") {
			t.Errorf("the same catalog was indexed again:\n%s", f.logs)
		}
		if got := f.find(t, "banana", 1); !slices.Equal(got, []string{"b__banana"}) {
			t.Errorf("search banana = %v", got)
		}
	})
	t.Run("fits", func(t *testing.T) {
		pool := newFakePool("a", "b") // nothing listed yet
		f := newFixture(t, dir, pool, &Options{Embedder: emb, Debounce: time.Millisecond}, "a", "b")
		if !f.loop.Warm() || !f.loop.Cataloged("b") {
			t.Fatalf("Warm() = %v, Cataloged(b) = %v; want both", f.loop.Warm(), f.loop.Cataloged("b"))
		}
		f.run(t)
		if pool.started != "StartAsync" {
			t.Errorf("pool started with %q, want StartAsync", pool.started)
		}
		if got := f.find(t, "banana", 1); !slices.Equal(got, []string{"b__banana"}) {
			t.Errorf("warm search banana = %v", got)
		}
		// a lists (with a new tool); b has not: its last tools stay.
		pool.list("a", "apple", "avocado")
		f.loop.ToolsChanged("a", nil)
		f.wait(t, "the re-index", func(s Stats) bool { return s.CatalogGeneration == 2 })
		for _, q := range []string{"avocado", "banana"} {
			if got := f.find(t, q, 1); len(got) != 1 || !strings.HasSuffix(got[0], q) {
				t.Errorf("search %s after a listed = %v", q, got)
			}
		}
	})
	t.Run("another model", func(t *testing.T) {
		// Its cold start's searches say why it is cold: they said "first
		// start on this data folder" whatever the reason.
		pool := newFakePool("a", "b")
		pool.list("a", "apple")
		pool.list("b", "banana")
		emb := &gatedEmbedder{fakeEmbedder: fakeEmbedder{model: "m2"}, open: make(chan struct{})}
		f := newFixture(t, dir, pool, &Options{Embedder: emb, ColdWait: time.Millisecond}, "a", "b")
		if f.loop.Warm() {
			t.Error("Warm() with an index of another model")
		}
		if !strings.Contains(f.logs.String(), "built with another model") {
			t.Errorf("the log does not say why:\n%s", f.logs)
		}
		f.run(t)
		f.wait(t, "the build's tool count", func(s Stats) bool { return s.BuildingTotal == 2 })
		want := "the tool index is being built (0 of 2 tools embedded; the index in the data folder does not fit this config: it was built with another model); try again in a few seconds"
		if err := f.loop.Building(); err == nil || err.Error() != want {
			t.Errorf("Building() = %v, want %q", err, want)
		}
		close(emb.open)
		f.wait(t, "the first index", func(s Stats) bool { return s.CatalogGeneration > 0 && !s.Building })
	})
	t.Run("server no longer configured", func(t *testing.T) {
		f := newFixture(t, dir, newFakePool("a"), &Options{Embedder: emb}, "a")
		if f.loop.Warm() {
			t.Error("Warm() with an index holding server b, which the config does not list")
		}
		if !strings.Contains(f.logs.String(), `it holds server \"b\"`) {
			t.Errorf("the log does not say why:\n%s", f.logs)
		}
	})
}

// The first start after an upgrade that changed the catalog snapshot
// (index format 6 to 7) is cold, and its searches and log say so: they
// said "the index in the data folder could not be read", as for a damaged
// one.
func TestColdStartFromAnotherVersionsSnapshot(t *testing.T) {
	dir := t.TempDir()
	emb := &fakeEmbedder{model: "m1"}
	lastRun(t, dir, emb)
	olderSnapshot(t, dir)
	pool := newFakePool("a", "b")
	gated := &gatedEmbedder{fakeEmbedder: fakeEmbedder{model: "m1"}, open: make(chan struct{})}
	f := newFixture(t, dir, pool, &Options{Embedder: gated, ColdWait: time.Millisecond}, "a", "b")
	if f.loop.Warm() {
		t.Fatal("Warm() from a snapshot of another toolgate version")
	}
	if !strings.Contains(f.logs.String(), "another toolgate version") || !strings.Contains(f.logs.String(), `\"TGC2\" is an older toolgate's`) {
		t.Errorf("the log does not say why:\n%s", f.logs)
	}
	pool.list("a", "apple")
	pool.list("b", "banana")
	f.run(t)
	f.wait(t, "the build's tool count", func(s Stats) bool { return s.BuildingTotal == 2 })
	want := "the tool index is being built (0 of 2 tools embedded; the index in the data folder is another toolgate version's: this one builds its own once, from the servers' listings (vectors from the embedding cache)); try again in a few seconds"
	if err := f.loop.Building(); err == nil || err.Error() != want {
		t.Errorf("Building() = %v, want %q", err, want)
	}
	close(gated.open)
	f.wait(t, "the first index", func(s Stats) bool { return s.CatalogGeneration > 0 && !s.Building })
}

// olderSnapshot makes the index in dir look as the toolgate of index
// format 6 wrote it: its manifest's format, its snapshot's header "TGC2".
func olderSnapshot(t *testing.T, dir string) {
	t.Helper()
	mp := filepath.Join(dir, "manifest.json")
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["format"] = 6
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, fmt.Sprintf("gen-%v", m["generation"]), "catalog.bin")
	cat, err := os.ReadFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	copy(cat, "TGC2")
	if err := os.WriteFile(cp, cat, 0o644); err != nil {
		t.Fatal(err)
	}
}

// lastRun runs a loop over servers a (tool apple) and b (banana) with
// emb, its index in dir, and closes it: the run before a warm start.
func lastRun(t *testing.T, dir string, emb *fakeEmbedder) {
	t.Helper()
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana")
	f := newFixture(t, dir, pool, &Options{Embedder: emb}, "a", "b")
	f.run(t)
	if err := f.loop.Close(); err != nil {
		t.Fatal(err)
	}
}

// A re-index that fails keeps the previous index and says why in Stats.
func TestIndexErrorKeepsServing(t *testing.T) {
	emb := &fakeEmbedder{model: "m1"}
	f, pool := runApple(t, t.TempDir(), &Options{Embedder: emb, Debounce: time.Millisecond})
	emb.fail.Store(true)
	pool.list("a", "apple", "avocado")
	f.loop.ToolsChanged("a", nil)
	st := f.wait(t, "the index error", func(s Stats) bool { return s.LastIndexError != "" })
	if st.CatalogGeneration != 1 || !strings.Contains(st.LastIndexError, "embedder broke") || st.LastIndexErrorAt.IsZero() {
		t.Errorf("after a failed re-index: %+v", st)
	}
	if got := f.find(t, "apple", 5); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("search after a failed re-index = %v, want the previous index's a__apple", got)
	}
	emb.fail.Store(false)
	f.loop.ToolsChanged("a", nil)
	st = f.wait(t, "the re-index", func(s Stats) bool { return s.CatalogGeneration == 2 })
	if st.CatalogTools != 2 || st.LastIndexError == "" {
		t.Errorf("after the next re-index: %+v (the last error is kept)", st)
	}
}

// A reload hides a removed server's tools at once — before the re-index,
// held off here by a long debounce — and the policy says why they cannot
// run; SIGHUP forces a reload of unchanged content.
func TestReloadHidesRemovedServer(t *testing.T) {
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana", "berry")
	hup := make(chan os.Signal, 1)
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Hour, Reload: hup}, "a", "b")
	f.run(t)

	writeFile(t, f.path, configBytes(t, nil, "a", "c"))
	hup <- syscall.SIGHUP
	st := f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	want := &Reload{At: st.LastReload.At, Trigger: "SIGHUP", Added: []string{"c"}, Removed: []string{"b"}, Unchanged: []string{"a"}}
	if diff := cmp.Diff(want, st.LastReload); diff != "" {
		t.Errorf("LastReload (-want +got):\n%s", diff)
	}
	if st.CatalogGeneration != 1 || st.CatalogTools != 3 || !st.Reindexing {
		t.Fatalf("after the reload: %+v; want b's tools still in the index, a re-index wanted", st)
	}
	if got := f.find(t, "banana berry apple", 5); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("search after removing b = %v, want only a__apple", got)
	}
	tl, ok := f.loop.Tool("b__banana")
	if !ok {
		t.Fatal("b__banana left the index before the re-index")
	}
	if d := f.loop.Policy().Decide(nil, tl); d.Allowed || !strings.Contains(d.Reason, `"b" was removed from the config`) {
		t.Errorf("Decide(b__banana) = %+v, want denied: removed from the config", d)
	}
	if diff := cmp.Diff([][]string{{"a", "c"}}, pool.reconfigures()); diff != "" {
		t.Errorf("Reconfigure calls (-want +got):\n%s", diff)
	}
	log := f.logs.String()
	for _, w := range []string{`msg="config reloaded"`, "trigger=SIGHUP", "added=[c]", "removed=[b]", "unchanged=1 "} {
		if !strings.Contains(log, w) {
			t.Errorf("the reload's log line lacks %s:\n%s", w, log)
		}
	}
	// The servers unchanged are counted, not named: at 100 servers the
	// line named them all for a change of one.
	if strings.Contains(log, "unchanged=[") {
		t.Errorf("the reload's log line names the servers unchanged:\n%s", log)
	}

	// The same content again: only a signal reloads it.
	hup <- syscall.SIGHUP
	st = f.wait(t, "the forced reload", func(s Stats) bool { return s.ReloadGeneration == 2 })
	if st.LastReload.Error != "" || !slices.Equal(st.LastReload.Unchanged, []string{"a", "c"}) {
		t.Errorf("forced reload: %+v", st.LastReload)
	}
}

// A file change is picked up by the watcher; the re-index then drops the
// removed server's tools and indexes the added one's as it lists.
func TestReloadOnFileChange(t *testing.T) {
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana", "berry")
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond}, "a", "b")
	f.run(t)

	writeFile(t, f.path, configBytes(t, map[string]any{"search": map[string]any{"defaultLimit": 3}}, "a", "c"))
	st := f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	if r := st.LastReload; r.Trigger != "file changed" || !slices.Equal(r.RestartOnly, []string{"toolgate.search"}) {
		t.Errorf("LastReload = %+v, want a file change with toolgate.search waiting for a restart", r)
	}
	st = f.wait(t, "the index without b", func(s Stats) bool { return s.CatalogTools == 1 })
	pool.list("c", "cherry")
	f.loop.ToolsChanged("c", nil)
	f.wait(t, "the index with c", func(s Stats) bool { return s.CatalogGeneration > st.CatalogGeneration && s.CatalogTools == 2 })
	if got := f.find(t, "cherry banana", 5); !slices.Equal(got, []string{"c__cherry"}) {
		t.Errorf("search = %v, want c__cherry only", got)
	}
}

// With SearchFrom, a reload that changes toolgate.search applies it from
// the next search on (the gateway's serve passes it): it used to wait for a
// restart, which for a stdio gateway is each client's.
func TestReloadAppliesSearch(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple", "apricot")
	var asked []config.SearchSettings
	from := func(s config.SearchSettings) *search.Options {
		asked = append(asked, s)
		o := &search.Options{Mode: search.Mode(s.Mode), KeywordWeight: s.KeywordWeight, VectorWeight: s.VectorWeight}
		if s.MinConfidence != nil {
			o.MinConfidence = *s.MinConfidence
		}
		return o
	}
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond, SearchFrom: from}, "a")
	f.run(t)
	if o := f.loop.eng.Load().Options(); o.KeywordWeight != search.DefaultKeywordWeight || o.MinConfidence != search.DefaultMinConfidence {
		t.Fatalf("options before: %+v, want the default weights and confidence", o)
	}

	writeFile(t, f.path, configBytes(t, map[string]any{"search": map[string]any{"mode": "vector", "keywordWeight": 0.8, "minConfidence": 1}, "embed": map[string]any{"variant": "int8"}}, "a"))
	st := f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	if r := st.LastReload; !slices.Equal(r.Applied, []string{"toolgate.search"}) || !slices.Equal(r.RestartOnly, []string{"toolgate.embed"}) {
		t.Errorf("LastReload = %+v, want toolgate.search applied and toolgate.embed waiting for a restart", r)
	}
	if !slices.Equal(st.RestartPending, []string{"toolgate.embed"}) {
		t.Errorf("RestartPending = %v, want toolgate.embed", st.RestartPending)
	}
	if len(asked) != 1 || asked[0].Mode != "vector" {
		t.Errorf("SearchFrom asked for %+v, want the new settings once", asked)
	}
	if o := f.loop.eng.Load().Options(); o.Mode != search.ModeVector || o.KeywordWeight != 0.8 || math.Abs(o.VectorWeight-0.2) > 1e-9 || o.MinConfidence != 1 {
		t.Errorf("options after the reload: %+v, want vector, weights 0.8/0.2 and minConfidence 1", o)
	}
	if st := f.loop.SearchState(); st.Configured != search.ModeVector {
		t.Errorf("search state after the reload: %+v, want configured vector", st)
	}
	if log := f.logs.String(); !strings.Contains(log, `msg="search settings applied"`) || !strings.Contains(log, "mode=vector") {
		t.Errorf("the log does not say the search settings applied:\n%s", log)
	}

	// Settings that did not change are not applied again.
	writeFile(t, f.path, configBytes(t, map[string]any{"search": map[string]any{"mode": "vector", "keywordWeight": 0.8, "minConfidence": 1}}, "a"))
	st = f.wait(t, "the second reload", func(s Stats) bool { return s.ReloadGeneration == 2 })
	if r := st.LastReload; r.Applied != nil || len(asked) != 1 {
		t.Errorf("reload without a search change: %+v, SearchFrom asked %d times; want nothing applied", r, len(asked))
	}
	// toolgate.embed is back as the gateway started with it: nothing waits.
	if r := st.LastReload; !slices.Equal(r.RestartOnly, []string{"toolgate.embed"}) || st.RestartPending != nil {
		t.Errorf("embed set back: restartOnly %v, pending %v; want the change said, nothing pending", r.RestartOnly, st.RestartPending)
	}
}

// A gateway that serves no config's toolgate.http.addr (serve --http
// given: it wins at every start) says that a reload that moves it changes
// nothing, now or after a restart, rather than that it waits for one; the
// rest of toolgate.http still does.
func TestReloadHTTPAddrIgnored(t *testing.T) {
	f, _ := runApple(t, t.TempDir(), &Options{Debounce: time.Millisecond, HTTPAddrIgnored: "serve --http 127.0.0.1:1 given on the command line wins over it"})
	writeFile(t, f.path, configBytes(t, map[string]any{"http": map[string]any{"addr": "127.0.0.1:2"}}, "a"))
	st := f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	if r := st.LastReload; r.Error != "" || r.RestartOnly != nil || st.RestartPending != nil {
		t.Errorf("addr moved: reload %+v, pending %v; want nothing waiting for a restart", r, st.RestartPending)
	}
	log := f.logs.String()
	if !strings.Contains(log, "this gateway does not serve it, now or after a restart: nothing to do") || !strings.Contains(log, "wins over it") || strings.Contains(log, "take effect on restart") {
		t.Errorf("the log does not say the change is moot:\n%s", log)
	}
	writeFile(t, f.path, configBytes(t, map[string]any{"http": map[string]any{"addr": "127.0.0.1:3", "allowedOrigins": []string{"https://a.example"}}}, "a"))
	st = f.wait(t, "the second reload", func(s Stats) bool { return s.ReloadGeneration == 2 })
	if r := st.LastReload; !slices.Equal(r.RestartOnly, []string{"toolgate.http"}) || !slices.Equal(st.RestartPending, []string{"toolgate.http"}) {
		t.Errorf("allowedOrigins changed: reload %+v, pending %v; want toolgate.http waiting for a restart", r, st.RestartPending)
	}
}

// A file that cannot be used changes nothing, is counted, and says why; the
// next good save applies, and the last error stays on record.
func TestReloadRejected(t *testing.T) {
	f, pool := runApple(t, t.TempDir(), &Options{Debounce: time.Millisecond})

	for i, tc := range []struct {
		name string
		data string
		want string
	}{
		{"broken JSON", `{"mcpServers": {"a": {"command": `, "invalid JSON"},
		{"invalid", `{"mcpServers": {"a b": {"command": "x"}}}`, `mcpServers["a b"]: invalid server name`},
		{"empty", "", "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, f.path, []byte(tc.data))
			n := uint64(i + 1)
			st := f.wait(t, "the rejected reload", func(s Stats) bool { return s.ReloadGeneration == n })
			if !strings.Contains(st.LastReloadError, tc.want) || st.LastReload.Error != st.LastReloadError || st.LastReloadErrorAt.IsZero() {
				t.Errorf("stats %+v, want the error to say %q", st, tc.want)
			}
			if n := len(pool.reconfigures()); n != 0 {
				t.Errorf("the pool was reconfigured %d times", n)
			}
			if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
				t.Errorf("search after a rejected reload = %v", got)
			}
		})
	}
	if !strings.Contains(f.logs.String(), "the previous config stays in effect") {
		t.Errorf("the log does not say the previous config stays:\n%s", f.logs)
	}

	writeFile(t, f.path, configBytes(t, nil, "a", "b"))
	st := f.wait(t, "the good reload", func(s Stats) bool { return s.ReloadGeneration == 4 })
	if st.LastReload.Error != "" || !slices.Equal(st.LastReload.Added, []string{"b"}) || !strings.Contains(st.LastReloadError, "is empty") {
		t.Errorf("after a good save: %+v (last reload %+v)", st, st.LastReload)
	}
}

// A config file that could not be read and comes back as it was (moved
// away and back) is a reload: the rejection is not the last word. The
// rejection says the file is gone and to put it back; it read as at start
// ("no such file or directory", and for a relative path the hint to give
// an absolute one).
func TestReloadFileBack(t *testing.T) {
	f, _ := runApple(t, t.TempDir(), &Options{Debounce: time.Millisecond})
	away := f.path + ".away"
	if err := os.Rename(f.path, away); err != nil {
		t.Fatal(err)
	}
	st := f.wait(t, "the rejected reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	const gone = "is gone (removed or moved away): put the file back (the gateway keeps the config in effect meanwhile"
	if !strings.Contains(st.LastReload.Error, gone) {
		t.Fatalf("file gone: last reload %+v", st.LastReload)
	}
	if err := os.Rename(away, f.path); err != nil {
		t.Fatal(err)
	}
	st = f.wait(t, "the reload of the file back", func(s Stats) bool { return s.ReloadGeneration == 2 })
	if st.LastReload.Error != "" || !slices.Equal(st.LastReload.Unchanged, []string{"a"}) || !strings.Contains(st.LastReloadError, gone) {
		t.Errorf("file back: %+v (last reload %+v)", st, st.LastReload)
	}
	if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("search after the file came back = %v", got)
	}
}

// A reload that adds a server whose entry refers to an unset variable is
// applied (it used to be rejected whole): the server is handed to the pool
// with its unset variables, which keep it down, and the others run on.
func TestReloadWithUnsetVariable(t *testing.T) {
	f, _ := runApple(t, t.TempDir(), &Options{Debounce: time.Millisecond})
	writeFile(t, f.path, []byte(`{"mcpServers": {"a": {"command": "fake-a"}, "b": {"command": "fake-b", "env": {"T": "${TOOLGATE_TEST_UNSET_LIVE}"}}}}`))
	st := f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	if st.LastReload.Error != "" || !slices.Equal(st.LastReload.Added, []string{"b"}) {
		t.Fatalf("reload: %+v", st.LastReload)
	}
	b := f.loop.Config().MCPServers["b"]
	if !slices.Equal(b.Unset, []config.UnsetVar{{Name: "TOOLGATE_TEST_UNSET_LIVE", Field: "env.T"}}) || b.UnsetError() == nil {
		t.Errorf("b in the config applied: unset %v", b.Unset)
	}
	if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("search after the reload = %v", got)
	}
}

// A look at a file whose content did not change is no reload.
func TestReloadUnchangedContent(t *testing.T) {
	f, pool := runApple(t, t.TempDir(), &Options{Debounce: time.Hour})
	f.loop.reload(context.Background(), "file changed", "", false)
	if st := f.loop.Stats(); st.ReloadGeneration != 0 || len(pool.reconfigures()) != 0 {
		t.Errorf("an unchanged file was reloaded: %+v", st)
	}
	f.loop.reload(context.Background(), "test", "", true)
	if st := f.loop.Stats(); st.ReloadGeneration != 1 || st.LastReload.Trigger != "test" {
		t.Errorf("a forced reload: %+v", st)
	}
}

// Close stops the loop's goroutines; searches then say the catalog is not
// loaded, and Close may be called again.
func TestClose(t *testing.T) {
	f, _ := runApple(t, t.TempDir(), nil)
	if err := f.loop.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.loop.Search(context.Background(), search.Query{Text: "apple"}); err == nil {
		t.Error("Search after Close: no error")
	}
	if _, ok := f.loop.Tool("a__apple"); ok || f.loop.IDs() != nil {
		t.Error("Tool or IDs answer after Close")
	}
	f.loop.ToolsChanged("a", nil) // the pool may still call it: harmless
}

func TestMerge(t *testing.T) {
	prev := Merge(nil, map[string][]*mcp.Tool{"a": {{Name: "old"}}, "gone": {{Name: "x"}}}, []string{"a", "gone"})
	pool := newFakePool()
	pool.list("b", "new")
	got := Merge(prev, pool.Tools(), []string{"a", "b"})
	var ids []string
	for _, t := range got {
		ids = append(ids, t.ID())
	}
	// a has not listed: its previous tools stay; gone is not configured.
	if !slices.Equal(ids, []string{"a__old", "b__new"}) {
		t.Errorf("Merge = %v", ids)
	}
}

func TestSettingChanges(t *testing.T) {
	var base config.Settings
	tests := []struct {
		name      string
		change    func(*config.Settings)
		hot       []string
		now, want []string
	}{
		{"nothing", func(*config.Settings) {}, nil, nil, nil},
		{"timeouts apply at run time", func(s *config.Settings) {
			s.CallTimeout.Duration, s.ConnectTimeout.Duration = 1, 2
		}, nil, []string{"toolgate.connectTimeout", "toolgate.callTimeout"}, nil},
		{"http addr", func(s *config.Settings) { s.HTTP.Addr = "127.0.0.1:1" }, nil, nil, []string{"toolgate.http"}},
		{"telemetry", func(s *config.Settings) { s.Telemetry.OTLPEndpoint = "http://127.0.0.1:4318" }, nil, nil, []string{"toolgate.telemetry"}},
		{"search and embed", func(s *config.Settings) {
			s.Search.DefaultLimit, s.Embed.Variant = 7, "int8"
		}, nil, nil, []string{"toolgate.search", "toolgate.embed"}},
		{"search applied", func(s *config.Settings) {
			s.Search.DefaultLimit, s.Embed.Variant = 7, "int8"
		}, []string{"toolgate.search"}, []string{"toolgate.search"}, []string{"toolgate.embed"}},
		{"data dir, restart, connects", func(s *config.Settings) {
			s.DataDir, s.Restart.Delays, s.MaxConcurrentConnects = "/x", []config.Duration{}, 1
		}, nil, nil, []string{"toolgate.maxConcurrentConnects", "toolgate.restart", "toolgate.dataDir"}},
		// Learning is set up at start: a change waits for a restart, and
		// says so (it was neither applied nor listed).
		{"learn", func(s *config.Settings) { off := false; s.Learn.Enabled = &off }, nil, nil, []string{"toolgate.learn"}},
		{"profiles, an empty map as none", func(s *config.Settings) { s.Profiles = map[string]config.Profile{} }, nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur := base
			tc.change(&cur)
			now, later := settingChanges(base, cur, tc.hot)
			if diff := cmp.Diff(tc.now, now); diff != "" {
				t.Errorf("applied at once (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, later); diff != "" {
				t.Errorf("waiting for a restart (-want +got):\n%s", diff)
			}
		})
	}
}

// Every setting of the toolgate section is either applied by a reload or
// said to wait for a restart: a field added to config.Settings without a
// line in settingChanges' table fails here (toolgate.learn was silently
// neither).
func TestSettingChangesCoverEveryField(t *testing.T) {
	var names []string
	for _, s := range settingsTable(config.Settings{}, config.Settings{}, nil) {
		names = append(names, s.name)
	}
	rt := reflect.TypeFor[config.Settings]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" && !slices.Contains(names, "toolgate."+name) {
			t.Errorf("config.Settings.%s (toolgate.%s) is not in settingChanges' table", rt.Field(i).Name, name)
		}
	}
	if len(names) != rt.NumField() {
		t.Errorf("settingChanges' table has %d settings, config.Settings %d fields", len(names), rt.NumField())
	}
}

// A data folder that cannot take the index — removed while serving, or a
// file in its place at start — gets an index built in memory, served and
// kept in step with the tools; once the folder takes writes again the loop
// writes the index there by itself. "Removed after the check" is the race
// of an rm -rf with the check before each write: the index must not make
// the data folder again.
func TestStorageFaultIndexesInMemory(t *testing.T) {
	for _, start := range []string{"writable at start", "a file at start", "removed after the check"} {
		t.Run(start, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			h := storage.New(data, nil)
			if err := h.Prepare(); err != nil {
				t.Fatal(err)
			}
			w := h.Writer("index", "the index is built in memory")
			var gate Storage = w
			if start == "removed after the check" {
				gate = storagetest.CheckedBefore(w)
			}
			manifest := filepath.Join(index.Dir(data), "manifest.json")
			breakIt := func() {
				if err := os.RemoveAll(data); err != nil {
					t.Fatal(err)
				}
				if start == "a file at start" {
					writeFile(t, data, []byte("not a folder"))
				}
			}
			if start == "a file at start" {
				breakIt()
			}
			f, pool := runApple(t, index.Dir(data), &Options{Embedder: &fakeEmbedder{model: "m1"}, Debounce: time.Millisecond, Storage: gate, StorageRetry: 10 * time.Millisecond})
			st := f.loop.Stats()
			if st.IndexInMemory != (start == "a file at start") || st.CatalogGeneration != 1 {
				t.Fatalf("after Run (%s): %+v", start, st)
			}
			if start != "a file at start" {
				breakIt()
			}

			pool.list("a", "apple", "avocado")
			f.loop.ToolsChanged("a", nil)
			// The index served holds both tools, built in memory. Not an
			// exact generation: when the folder goes after the check, each
			// look at it (every StorageRetry) finds it fit, the write fails
			// and the index is built in memory again, so the count moves on
			// (822 when a loaded machine woke this wait late).
			st = f.wait(t, "the re-index in memory", func(s Stats) bool { return s.IndexInMemory && s.CatalogTools == 2 })
			if !st.IndexInMemory || st.CatalogTools != 2 || start != "removed after the check" && (st.CatalogGeneration != 2 || st.Reindexing) {
				t.Fatalf("re-index while the folder is gone: %+v, want 2 tools in memory (the second index, settled, when the folder's fault is seen)", st)
			}
			if got := f.find(t, "avocado", 1); !slices.Equal(got, []string{"a__avocado"}) {
				t.Errorf("search avocado while the folder is broken = %v", got)
			}
			if !w.Failing() {
				t.Error("the index writer does not report the fault")
			}
			if fi, err := os.Stat(data); err == nil && fi.IsDir() {
				t.Error("the loop created the data folder again while it was broken")
			}

			if err := os.RemoveAll(data); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(data, 0o755); err != nil {
				t.Fatal(err)
			}
			st = f.wait(t, "the index written to the folder again", func(s Stats) bool { return !s.IndexInMemory && !s.Reindexing })
			if _, err := os.Stat(manifest); err != nil || w.Failing() || st.CatalogTools != 2 {
				t.Errorf("after the folder is back: %+v, manifest: %v, writer failing: %v", st, err, w.Failing())
			}
			if got := f.find(t, "avocado", 1); !slices.Equal(got, []string{"a__avocado"}) {
				t.Errorf("search avocado from the index on disk = %v", got)
			}
		})
	}
}

// A reload warns of a variable written without braces in the servers it
// adds (or changes), as serve does at start, and not again for those it
// leaves running.
func TestReloadSaysBareReferences(t *testing.T) {
	pool := newFakePool("a")
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond}, "a")
	f.run(t)
	writeFile(t, f.path, []byte(`{"mcpServers": {"a": {"command": "fake-a"}, "b": {"command": "fake-b", "env": {"TOKEN": "$B_TOKEN"}}}}`))
	f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	const want = `msg="a variable written without braces reaches the server as written" server=b value="env.TOKEN is \"$B_TOKEN\", passed as written: toolgate expands ${B_TOKEN} (with braces)"`
	if !strings.Contains(f.logs.String(), want) {
		t.Errorf("the log lacks %s:\n%s", want, f.logs)
	}
	writeFile(t, f.path, []byte(`{"mcpServers": {"a": {"command": "fake-a", "args": ["x"]}, "b": {"command": "fake-b", "env": {"TOKEN": "$B_TOKEN"}}}}`))
	f.wait(t, "the second reload", func(s Stats) bool { return s.ReloadGeneration == 2 })
	if n := strings.Count(f.logs.String(), "a variable written without braces"); n != 1 {
		t.Errorf("said %d times, want once (b was left running):\n%s", n, f.logs)
	}
}

// compactingEmbedder is an embedder (a fakeEmbedder, a gatedEmbedder) with
// a Compact (embed.Cached's) that closes entered, then waits for release.
type compactingEmbedder struct {
	index.Embedder
	entered, release chan struct{}
}

func (e *compactingEmbedder) Compact() error {
	close(e.entered)
	<-e.release
	return nil
}

// Once the first index is built, Run waits for the embedding cache's
// compaction and the index's serving even when ColdWait's deadline comes
// meanwhile: it returned then, so the client listed no tools and got a
// list_changed a moment later.
func TestColdStartDeadlineWhileCompacting(t *testing.T) {
	for _, stop := range []bool{true, false} {
		pool := newFakePool("a")
		pool.list("a", "apple", "apricot")
		emb := &compactingEmbedder{Embedder: &fakeEmbedder{model: "fake@1"}, entered: make(chan struct{}), release: make(chan struct{})}
		f := newFixture(t, t.TempDir(), pool, &Options{Embedder: emb, ColdWait: time.Hour}, "a")
		deadline := make(chan time.Time)
		f.loop.coldDeadline = deadline
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() { done <- f.loop.Run(ctx, pool) }()
		<-emb.entered // built, now compacted
		if st := f.loop.Stats(); !st.Building || st.BuildingTools != 2 || st.BuildingTotal != 2 || st.CatalogGeneration != 0 {
			t.Errorf("while compacting: %+v, want building, 2 of 2 tools embedded, nothing served", st)
		}
		deadline <- time.Now() // taken by Run
		if stop {
			// Run still waits (for the serving, or ctx): it did not answer.
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Run stopped while the index was compacted after ColdWait: %v, want it waiting (context.Canceled)", err)
			}
			close(emb.release) // lets the build's goroutine end before Close
			continue
		}
		close(emb.release)
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if st := f.loop.Stats(); st.Building || st.CatalogGeneration != 1 || st.CatalogTools != 2 {
			t.Errorf("when Run returned: %+v, want the index served (generation 1, 2 tools, not building)", st)
		}
	}
}

// gatedEmbedder is fakeEmbedder whose Embed waits for open to be closed.
type gatedEmbedder struct {
	fakeEmbedder
	open chan struct{}
}

func (e *gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	select {
	case <-e.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.fakeEmbedder.Embed(ctx, texts)
}

// With ColdWait, a cold start's Run returns while the backends connect
// and the first index is built; searches meanwhile say how far the build
// is, then find the tools once it is served. A build that fails goes to
// ColdFailed, and searches say so.
func TestColdStartInBackground(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple", "apricot")
	connect, connected := make(chan struct{}), make(chan struct{})
	pool.onStart = func() { close(connected); <-connect }
	emb := &gatedEmbedder{fakeEmbedder: fakeEmbedder{model: "fake@1"}, open: make(chan struct{})}
	failed := make(chan error, 1)
	f := newFixture(t, t.TempDir(), pool, &Options{Embedder: emb, ColdWait: time.Millisecond, ColdFailed: func(err error) { failed <- err }}, "a")
	f.run(t) // returns while the pool starts
	<-connected
	building := func(wantTools, wantTotal int, wantText string) {
		t.Helper()
		_, err := f.loop.Search(context.Background(), search.Query{Text: "apple"})
		var be *BuildingError
		if !errors.As(err, &be) || be.Tools != wantTools || be.Total != wantTotal || !strings.Contains(err.Error(), wantText) {
			t.Errorf("Search while building: %v, want a BuildingError of %d of %d tools saying %q", err, wantTools, wantTotal, wantText)
		}
	}
	if st := f.loop.Stats(); !st.Building || st.CatalogGeneration != 0 {
		t.Errorf("while the backends connect: %+v, want building, no catalog yet", st)
	}
	building(0, 0, "starting its servers")
	close(connect)
	f.wait(t, "the build's tool count", func(s Stats) bool { return s.BuildingTotal == 2 })
	building(0, 2, "the tool index is being built (0 of 2 tools embedded; first start on this data folder); try again in a few seconds")
	close(emb.open)
	st := f.wait(t, "the first index", func(s Stats) bool { return s.CatalogGeneration == 1 })
	if st.Building || st.BuildingTotal != 0 || st.CatalogTools != 2 {
		t.Errorf("once served: %+v, want 2 tools, not building", st)
	}
	if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("search apple once built = %v", got)
	}
	select {
	case err := <-failed:
		t.Errorf("ColdFailed called after a build that worked: %v", err)
	default:
	}

	// A build that fails after Run returned: ColdFailed gets its error.
	pool = newFakePool("a")
	pool.list("a", "apple")
	bad := &gatedEmbedder{fakeEmbedder: fakeEmbedder{model: "fake@1"}, open: make(chan struct{})}
	bad.fail.Store(true)
	f = newFixture(t, t.TempDir(), pool, &Options{Embedder: bad, ColdWait: time.Millisecond, ColdFailed: func(err error) { failed <- err }}, "a")
	f.run(t)
	close(bad.open)
	if err := <-failed; !strings.Contains(err.Error(), "embedder broke") {
		t.Errorf("ColdFailed got %v, want the embedder's error", err)
	}
	if _, err := f.loop.Search(context.Background(), search.Query{Text: "apple"}); err == nil || !strings.Contains(err.Error(), "the tool index could not be built") {
		t.Errorf("Search after a failed build: %v, want that the index could not be built", err)
	}

	// One that fails within ColdWait: Run returns its error, as without
	// ColdWait, and ColdFailed is not called.
	pool = newFakePool("a")
	pool.list("a", "apple")
	f = newFixture(t, t.TempDir(), pool, &Options{Embedder: &bad.fakeEmbedder, ColdWait: time.Hour, ColdFailed: func(err error) { failed <- err }}, "a")
	if err := f.loop.Run(context.Background(), pool); err == nil || !strings.Contains(err.Error(), "embedder broke") {
		t.Errorf("Run with a build that fails within ColdWait: %v, want the embedder's error", err)
	}
	select {
	case err := <-failed:
		t.Errorf("ColdFailed called though Run returned the error: %v", err)
	default:
	}
}

// A search whose wait for the first index (ColdWait) ends once that index
// is built, while the embedding cache is compacted and before the index
// is served, waits for those as Run does: it answered "being built (2 of
// 2 tools embedded)" moments before the index answered.
func TestColdSearchDeadlineWhileCompacting(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple", "apricot")
	gated := &gatedEmbedder{fakeEmbedder: fakeEmbedder{model: "fake@1"}, open: make(chan struct{})}
	emb := &compactingEmbedder{Embedder: gated, entered: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, t.TempDir(), pool, &Options{Embedder: emb, ColdWait: time.Hour}, "a")
	deadline := make(chan time.Time)
	f.loop.coldDeadline = deadline
	ran := make(chan error, 1)
	go func() { ran <- f.loop.Run(context.Background(), pool) }()
	deadline <- time.Now() // Run's, while the tools are embedded: it returns
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	close(gated.open)
	<-emb.entered // built, now compacted
	type answer struct {
		res search.Result
		err error
	}
	searched := make(chan answer, 1)
	go func() {
		res, err := f.loop.Search(context.Background(), search.Query{Text: "apple", Limit: 1})
		searched <- answer{res, err}
	}()
	deadline <- time.Now() // the search's, taken while the cache is compacted
	close(emb.release)
	a := <-searched
	if a.err != nil {
		t.Fatalf("a search whose wait ended while the built index was compacted: %v, want the index's answer", a.err)
	}
	if got := hitIDs(a.res); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("search apple = %v, want a__apple", got)
	}
}

// While a cold start's first index is built, Tool and IDs answer from the
// listings ToolsChanged was given (serve's OnToolsChanged, after the
// quarantine observed them) and the built-in servers' tools, not from the
// pool's tools, which a listing changes before it is observed; Building
// says how far the build is without waiting. Once the index is served,
// they are the index's.
func TestColdStartToolsWhileBuilding(t *testing.T) {
	pool := newFakePool("a", "b")
	pool.list("a", "apple", "apricot")
	pool.list("b", "banana") // in the pool, not yet observed
	builtin := []*mcp.Tool{{Name: "list_servers", Description: "List the servers", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	emb := &gatedEmbedder{fakeEmbedder: fakeEmbedder{model: "fake@1"}, open: make(chan struct{})}
	f := newFixture(t, t.TempDir(), pool, &Options{Embedder: emb, ColdWait: time.Millisecond, Builtin: map[string][]*mcp.Tool{"toolgate": builtin}}, "a", "b")
	f.run(t)
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	f.loop.ToolsChanged("a", []*mcp.Tool{{Name: "apple", Description: "tool apple of a", InputSchema: schema}, {Name: "apricot"}})
	f.wait(t, "the build's tool count", func(s Stats) bool { return s.BuildingTotal > 0 })
	if got, want := f.loop.IDs(), []string{"a__apple", "a__apricot", "toolgate__list_servers"}; !slices.Equal(got, want) {
		t.Errorf("IDs while building = %v, want %v (b's tools were not observed)", got, want)
	}
	if tool, ok := f.loop.Tool("a__apple"); !ok || tool.Description != "tool apple of a" || string(tool.InputSchema) != string(schema) {
		t.Errorf("Tool(a__apple) while building = %+v, %v, want the listed definition", tool, ok)
	}
	if _, ok := f.loop.Tool("toolgate__list_servers"); !ok {
		t.Error("the built-in tool is unknown while building")
	}
	if _, ok := f.loop.Tool("b__banana"); ok {
		t.Error("Tool(b__banana) found a tool whose listing was not observed")
	}
	var be *BuildingError
	if err := f.loop.Building(); !errors.As(err, &be) || be.Total == 0 {
		t.Errorf("Building while building = %v, want a BuildingError with the tools to embed", err)
	}
	// A listing again (list_changed) replaces the server's tools.
	f.loop.ToolsChanged("a", []*mcp.Tool{{Name: "apple"}})
	if got, want := f.loop.IDs(), []string{"a__apple", "toolgate__list_servers"}; !slices.Equal(got, want) {
		t.Errorf("IDs after a second listing = %v, want %v", got, want)
	}

	close(emb.open)
	f.wait(t, "the first index", func(s Stats) bool { return s.CatalogGeneration >= 1 })
	if err := f.loop.Building(); err != nil {
		t.Errorf("Building once served = %v, want nil", err)
	}
	if _, ok := f.loop.Tool("b__banana"); !ok {
		t.Error("Tool(b__banana) once the index is served: not found, want the index's tool")
	}
	f.loop.mu.Lock()
	listed := f.loop.listed
	f.loop.mu.Unlock()
	if listed != nil {
		t.Errorf("the listings are still held once the index is served: %v", listed)
	}
}

// A reload that changes toolgate.search while a cold start's first index
// is built (the management tools run meanwhile) applies it to the engine
// that index starts: there was none to apply it to.
func TestColdStartReloadAppliesSearch(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple")
	from := func(s config.SearchSettings) *search.Options {
		return &search.Options{Mode: search.Mode(s.Mode), KeywordWeight: s.KeywordWeight, VectorWeight: s.VectorWeight}
	}
	emb := &gatedEmbedder{fakeEmbedder: fakeEmbedder{model: "fake@1"}, open: make(chan struct{})}
	// A debounce of an hour: only the test's Reload (a management tool's)
	// reloads. The watcher's, 250 ms after the save by default, could come
	// first on a loaded machine, and the Reload then applied nothing.
	f := newFixture(t, t.TempDir(), pool, &Options{Embedder: emb, ColdWait: time.Millisecond, SearchFrom: from, Debounce: time.Hour}, "a")
	f.run(t)
	writeFile(t, f.path, configBytes(t, map[string]any{"search": map[string]any{"mode": "vector", "keywordWeight": 0.8}}, "a"))
	if r := f.loop.Reload(context.Background(), "test"); !slices.Equal(r.Applied, []string{"toolgate.search"}) {
		t.Fatalf("reload while building: %+v, want toolgate.search applied", r)
	}
	close(emb.open)
	f.wait(t, "the first index", func(s Stats) bool { return s.CatalogGeneration == 1 })
	if o := f.loop.eng.Load().Options(); o.Mode != search.ModeVector || o.KeywordWeight != 0.8 {
		t.Errorf("options of the first engine: %+v, want the reloaded vector mode, keyword weight 0.8", o)
	}
}

// TestConfigReplacedByFolder: a watched config file replaced by a folder
// while serving is a rejected reload that says to put the file back and
// that the config in effect stays; it read `read config: read …: is a
// directory`. The file put back is applied.
func TestConfigReplacedByFolder(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple")
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond}, "a")
	f.run(t)
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.path, 0o700); err != nil {
		t.Fatal(err)
	}
	// The removal may be seen before the folder (a reload saying the file
	// is gone, rejected too): the one to check is the folder's.
	const folder = "is a folder now, not the config file: put the file back (the gateway keeps the config in effect meanwhile"
	f.wait(t, "the reload of the folder, rejected with the fix", func(s Stats) bool {
		return s.LastReload != nil && strings.Contains(s.LastReload.Error, folder)
	})
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.path, configBytes(t, nil, "a"))
	f.wait(t, "the reload of the file put back", func(s Stats) bool { return s.LastReload != nil && s.LastReload.Error == "" })
	if got := f.find(t, "apple", 5); len(got) != 1 {
		t.Errorf("after the file is back: %v", got)
	}
}

// A listing whose readOnlyHint went from true to false takes the tool out
// of a readOnly profile at once, before the re-index (here an hour away)
// brings the catalog its new annotations; a reload keeps it out.
func TestReadOnlyProfileFollowsListing(t *testing.T) {
	pool := newFakePool("a")
	ro, rw := &mcp.ToolAnnotations{ReadOnlyHint: true}, &mcp.ToolAnnotations{DestructiveHint: new(bool)}
	pool.tools["a"] = []*mcp.Tool{{Name: "apple", Description: "tool apple", Annotations: ro}, {Name: "avocado", Description: "tool avocado"}}
	hup := make(chan os.Signal, 1)
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Hour, Reload: hup}, "a")
	f.run(t)
	writeFile(t, f.path, configBytes(t, map[string]any{"profiles": map[string]any{"ro": map[string]any{"readOnly": true}}}, "a"))
	hup <- syscall.SIGHUP
	f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })

	caller := &policy.Caller{Transport: policy.TransportHTTP, Profile: "ro"}
	seen := func() []string {
		res, err := f.loop.Search(context.Background(), search.Query{Text: "tool apple avocado", Limit: 5, Filter: f.loop.Policy().Filter(caller)})
		if err != nil {
			t.Fatal(err)
		}
		return hitIDs(res)
	}
	if got := seen(); !slices.Equal(got, []string{"a__apple"}) {
		t.Fatalf("profile ro sees %v, want a__apple (avocado declares no readOnlyHint)", got)
	}
	f.loop.ToolsChanged("a", []*mcp.Tool{{Name: "apple", Description: "tool apple", Annotations: rw}, {Name: "avocado", Description: "tool avocado"}})
	apple, ok := f.loop.Tool("a__apple")
	if !ok || !apple.ReadOnly() {
		t.Fatalf("the catalog changed before the re-index: %+v", apple)
	}
	if d := f.loop.Policy().Decide(caller, apple); d.Allowed || !strings.Contains(d.Reason, `outside profile "ro"`) {
		t.Errorf("after the listing: %+v, want denied by the profile", d)
	}
	if got := seen(); len(got) != 0 {
		t.Errorf("after the listing, profile ro sees %v", got)
	}
	hup <- syscall.SIGHUP
	f.wait(t, "the second reload", func(s Stats) bool { return s.ReloadGeneration == 2 })
	if d := f.loop.Policy().Decide(caller, apple); d.Allowed {
		t.Errorf("after a reload: %+v, want still denied", d)
	}
}

// The security log of a reload names the tools of this config's servers
// only: the pins file is the data folder's, shared with gateways of other
// configs, whose held tools GET /status leaves out too.
func TestReloadSecurityLogsOwnTools(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple")
	from := func(config.SecuritySettings) (released, held []string) {
		return []string{"a__apple", "other__pear"}, []string{"a__apricot", "other__plum"}
	}
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond, SecurityFrom: from}, "a")
	f.run(t)
	writeFile(t, f.path, configBytes(t, map[string]any{"security": map[string]any{"approvedTools": []any{"a__*"}}}, "a"))
	f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	log := f.logs.String()
	if !strings.Contains(log, "released=[a__apple]") || !strings.Contains(log, "quarantined=[a__apricot]") {
		t.Errorf("the log does not name this config's tools alone:\n%s", log)
	}
}

// TestWarmStartNewBuiltinDefinitions: a warm start after an upgrade that
// changed the management tools' definitions serves the new ones without
// waiting for a backend's listing: the catalog it answered from held the
// last run's, so search showed them and execute_tool checked arguments
// against them until a backend listed (toolgate__add_server refused the
// arguments it had gained as "not arguments of this tool").
func TestWarmStartNewBuiltinDefinitions(t *testing.T) {
	dir := t.TempDir()
	emb := &fakeEmbedder{model: "m1"}
	old := map[string][]*mcp.Tool{config.BuiltinServer: {{Name: "add_server", Description: "add a server", InputSchema: map[string]any{"type": "object"}}}}
	pool := newFakePool("a")
	pool.list("a", "apple")
	f := newFixture(t, dir, pool, &Options{Embedder: emb, Builtin: old}, "a")
	f.run(t)
	if err := f.loop.Close(); err != nil {
		t.Fatal(err)
	}
	now := map[string][]*mcp.Tool{config.BuiltinServer: {{Name: "add_server", Description: "add a server, with its language",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"language": map[string]any{"type": "string"}}}}}}
	pool2 := newFakePool("a") // a lists nothing yet: slow to start
	f2 := newFixture(t, dir, pool2, &Options{Embedder: emb, Builtin: now, Debounce: time.Millisecond}, "a")
	if !f2.loop.Warm() {
		t.Fatal("not a warm start")
	}
	f2.run(t)
	f2.wait(t, "the builtin's new definitions", func(s Stats) bool { return s.CatalogGeneration >= 2 && !s.Reindexing })
	tl, ok := f2.loop.Tool(config.BuiltinServer + "__add_server")
	if !ok || tl.Description != "add a server, with its language" || !strings.Contains(string(tl.InputSchema), "language") {
		t.Errorf("served add_server: %+v, want the new definition", tl)
	}
	if !f2.loop.Cataloged("a") {
		t.Error("a's last tools left the catalog")
	}
	if err := f2.loop.Close(); err != nil {
		t.Fatal(err)
	}
	// The same definitions at the next start: nothing to re-index.
	f3 := newFixture(t, dir, newFakePool("a"), &Options{Embedder: emb, Builtin: now, Debounce: time.Millisecond}, "a")
	f3.run(t)
	if st := f3.loop.Stats(); st.CatalogGeneration != 1 || st.Reindexing || strings.Contains(f3.logs.String(), "definitions changed") {
		t.Errorf("a warm start with the same built-in tools: %+v\n%s", st, f3.logs)
	}
}
