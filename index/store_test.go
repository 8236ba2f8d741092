package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
)

// cachingEmbedder stands in for embed's cache: texts it has seen are free,
// and it counts the ones that reach the model.
type cachingEmbedder struct {
	fakeEmbedder
	mu     sync.Mutex
	cache  map[string][]float32
	misses int
	hits   int
}

func (c *cachingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]float32, len(texts))
	var todo []string
	var at []int
	for i, s := range texts {
		if v, ok := c.cache[s]; ok {
			out[i] = v
			c.hits++
			continue
		}
		todo = append(todo, s)
		at = append(at, i)
	}
	if len(todo) > 0 {
		vs, _ := c.fakeEmbedder.Embed(ctx, todo)
		for k, i := range at {
			out[i] = vs[k]
			c.cache[todo[k]] = vs[k]
		}
		c.misses += len(todo)
	}
	return out, nil
}

func (c *cachingEmbedder) Stats() (hits, misses int) { return c.hits, c.misses }

// countingCache is a cachingEmbedder that says, as embed.Cached does, how
// many texts of a call its model embedded.
type countingCache struct{ *cachingEmbedder }

func (c countingCache) EmbedCounted(ctx context.Context, texts []string) ([][]float32, int, error) {
	_, before := c.Stats()
	out, err := c.cachingEmbedder.Embed(ctx, texts)
	_, after := c.Stats()
	return out, after - before, err
}

func newCaching(id string) *cachingEmbedder {
	return &cachingEmbedder{fakeEmbedder: fakeEmbedder{id: id, dim: 32}, cache: map[string][]float32{}}
}

func mustEnsure(t *testing.T, dir string, tools []catalog.Tool, emb Embedder) (*Index, Report) {
	t.Helper()
	var e Embedder
	if emb != nil {
		e = emb
	}
	ix, rep, err := EnsureReport(context.Background(), dir, tools, e, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix, rep
}

func TestEnsureStates(t *testing.T) {
	dir := t.TempDir()
	tools := testTools()
	emb := newCaching("fake/1")

	ix, rep := mustEnsure(t, dir, tools, emb)
	if rep.Before != StateMissing || !rep.Rebuilt || rep.Added != len(tools) || rep.Embedded != len(tools) || rep.Generation != 1 {
		t.Errorf("first build: %+v", rep)
	}
	if ix.Len() != len(tools) || !ix.HasVectors() || ix.ModelID() != "fake/1" {
		t.Errorf("first build: len %d vectors %v model %q", ix.Len(), ix.HasVectors(), ix.ModelID())
	}
	checkSearch(t, ix)

	// Same catalog, listed in another order: up to date, nothing embedded.
	shuffled := append([]catalog.Tool(nil), tools...)
	shuffled[0], shuffled[5] = shuffled[5], shuffled[0]
	calls := emb.calls
	ix2, rep := mustEnsure(t, dir, shuffled, emb)
	if rep.Before != StateUpToDate || rep.Rebuilt || emb.calls != calls {
		t.Errorf("unchanged: %+v, embedder calls %d → %d", rep, calls, emb.calls)
	}
	checkSearch(t, ix2)
	// Both know the fingerprint of the catalog they hold (the runtime
	// loop compares it with the live catalog's); an in-memory build does
	// not claim one.
	if fp := catalog.Fingerprint(tools); ix.Fingerprint() != fp || ix2.Fingerprint() != fp {
		t.Errorf("Fingerprint() = %q and %q, want %q", ix.Fingerprint(), ix2.Fingerprint(), fp)
	}
	if mem, err := Build(context.Background(), tools, emb, nil); err != nil || mem.Fingerprint() != "" {
		t.Errorf("Build: Fingerprint() %q, err %v; want \"\"", mem.Fingerprint(), err)
	} else {
		mem.Close()
	}
	if diff := cmp.Diff(ix.Tools(), ix2.Tools()); diff != "" {
		t.Errorf("reopened catalog differs:\n%s", diff)
	}

	// One description changed: catalog changed, one tool embedded.
	changed := testTools()
	changed[2].Description = "Create new entities (people, places) in the knowledge graph."
	changed = append(changed[:1], changed[2:]...) // and one removed
	changed = append(changed, catalog.Tool{Server: "memory", Name: "delete_entities", Description: "Delete entities."})
	_, rep = mustEnsure(t, dir, changed, emb)
	if rep.Before != StateCatalogChanged || rep.Added != 1 || rep.Changed != 1 || rep.Removed != 1 ||
		rep.Embedded != 2 || rep.Reused != 4 || rep.Generation != 2 {
		t.Errorf("catalog changed: %+v", rep)
	}
	assertGenerations(t, dir, 2)

	// Another model: everything re-embedded.
	other := newCaching("fake/2")
	_, rep = mustEnsure(t, dir, changed, other)
	if rep.Before != StateModelChanged || rep.Embedded != len(changed) || rep.Reused != 0 {
		t.Errorf("model changed: %+v", rep)
	}

	// No embedder: the index with vectors still serves.
	ixNil, rep := mustEnsure(t, dir, changed, nil)
	if rep.Before != StateUpToDate || !ixNil.HasVectors() {
		t.Errorf("nil embedder on an index with vectors: %+v", rep)
	}

	st, m, err := Inspect(dir, "fake/2", changed)
	if err != nil || st != StateUpToDate || m.Tools != len(changed) || m.ModelID != "fake/2" {
		t.Errorf("Inspect = %v %+v %v", st, m, err)
	}
	if st, _, _ := Inspect(dir, "", nil); st != StateUpToDate {
		t.Errorf("Inspect(any model, any catalog) = %v", st)
	}
	if st, _, _ := Inspect(t.TempDir(), "", nil); st != StateMissing {
		t.Errorf("Inspect(empty) = %v", st)
	}
}

// TestIncrementalEmbedding counts what reaches the model when one tool of
// many changes, with vectors kept from the previous generation and, behind
// them, the embed cache.
func TestIncrementalEmbedding(t *testing.T) {
	dir := t.TempDir()
	tools := syntheticTools(500)
	emb := newCaching("fake/1")
	views := map[string]bool{}
	for _, tool := range tools {
		for _, v := range catalog.Views(tool) {
			views[v] = true
		}
	}
	mustEnsure(t, dir, tools, emb)
	if emb.misses != len(views) {
		t.Fatalf("first build embedded %d texts, want %d (each tool's views)", emb.misses, len(views))
	}
	// A new last sentence changes the tool's full text only: its name and
	// lead sentence are in the cache.
	tools[123].Description += " Now with pagination."
	_, rep := mustEnsure(t, dir, tools, emb)
	if rep.Embedded != 1 || rep.Reused != 499 || emb.misses != len(views)+1 || rep.Changed != 1 {
		t.Errorf("after one change: %+v, model saw %d texts in all, want %d", rep, emb.misses, len(views)+1)
	}
	// With the previous generation gone (e.g. deleted folder), the cache alone
	// keeps the model from seeing unchanged texts again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_, rep = mustEnsure(t, dir, tools, emb)
	if rep.Before != StateMissing || rep.Embedded != 500 || emb.misses != len(views)+1 {
		t.Errorf("after deleting the index: %+v, model saw %d texts in all", rep, emb.misses)
	}
}

// TestEnsureBorrowsServedVectors: an index built in memory (the data
// folder could not take writes, and the embedding cache stored nothing)
// lends its vectors to the build that writes it to the folder once it
// can: no tool is embedded again, and the vectors are the same. Every tool
// was embedded again (45 tools: 1.7 s of CPU in a probe on a full tmpfs).
func TestEnsureBorrowsServedVectors(t *testing.T) {
	tools := syntheticTools(200)
	emb := &fakeEmbedder{id: "fake/1", dim: 32}
	served, err := Build(context.Background(), tools, emb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	calls := emb.calls
	dir := t.TempDir()
	ix, rep, err := EnsureReport(context.Background(), dir, tools, emb, &Options{Lend: []*Index{served}})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if rep.Embedded != 0 || rep.Reused != len(tools) || emb.calls != calls {
		t.Errorf("written from the index served: %+v, embedder calls %d → %d; want every vector reused", rep, calls, emb.calls)
	}
	for _, tool := range tools[:5] {
		a, _ := served.Vector(tool.ID())
		b, ok := ix.Vector(tool.ID())
		if !ok || !slices.Equal(a, b) {
			t.Errorf("%s: vector written %v, served %v", tool.ID(), b, a)
		}
	}
	// A lent index of another model lends nothing.
	other := &fakeEmbedder{id: "fake/2", dim: 32}
	ix2, rep, err := EnsureReport(context.Background(), t.TempDir(), tools, other, &Options{Lend: []*Index{served}})
	if err != nil {
		t.Fatal(err)
	}
	defer ix2.Close()
	if rep.Embedded != len(tools) {
		t.Errorf("with another model's index lent: %+v, want every tool embedded", rep)
	}
}

func checkSearch(t *testing.T, ix *Index) {
	t.Helper()
	hits, err := ix.Keyword("list the files in a directory", 3, "")
	if err != nil || len(hits) == 0 || hits[0].ID != "filesystem__list_directory" {
		t.Errorf("Keyword = %v, %v", hits, err)
	}
	hits, err = ix.Keyword("replace", 3, "my server")
	if err != nil || len(hits) != 1 || hits[0].ID != "my server__search & replace" {
		t.Errorf("Keyword(odd server) = %v, %v", hits, err)
	}
	if ix.HasVectors() {
		tool, _ := ix.Tool("filesystem__read_file")
		near := ix.Nearest(toolVector(tool, ix.Dim()), 1, "")
		if len(near) != 1 || near[0].ID != tool.ID() {
			t.Errorf("Nearest = %v", near)
		}
	}
}

func assertGenerations(t *testing.T, dir string, want ...int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, e := range entries {
		if g, ok := parseGen(e.Name()); ok {
			got = append(got, g)
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("generations on disk (-want +got):\n%s", diff)
	}
}

func TestEnsureRebuildsBrokenIndex(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, ixDir string)
	}{
		{"garbage manifest", func(t *testing.T, ixDir string) {
			os.WriteFile(filepath.Join(ixDir, manifestFile), []byte("{not json"), 0o644)
		}},
		{"truncated manifest", func(t *testing.T, ixDir string) {
			os.WriteFile(filepath.Join(ixDir, manifestFile), []byte(`{"format":1,`), 0o644)
		}},
		{"foreign format", func(t *testing.T, ixDir string) {
			os.WriteFile(filepath.Join(ixDir, manifestFile), []byte(`{"format":99,"generation":1}`), 0o644)
		}},
		{"generation missing", func(t *testing.T, ixDir string) {
			os.RemoveAll(genDir(ixDir, 1))
		}},
		{"vectors truncated", func(t *testing.T, ixDir string) {
			os.Truncate(filepath.Join(genDir(ixDir, 1), vectorsFile), 100)
		}},
		{"catalog garbled", func(t *testing.T, ixDir string) {
			os.WriteFile(filepath.Join(genDir(ixDir, 1), catalogFile), []byte("TGC1\x05garbage"), 0o644)
		}},
		{"bleve gone", func(t *testing.T, ixDir string) {
			os.RemoveAll(filepath.Join(genDir(ixDir, 1), bleveSubdir))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			emb := newCaching("fake/1")
			ix, _ := mustEnsure(t, dir, testTools(), emb)
			ix.Close()
			tc.damage(t, dir)
			if _, err := Open(dir, nil); err == nil {
				t.Error("Open of a broken index succeeded")
			}
			ix, rep := mustEnsure(t, dir, testTools(), emb)
			if rep.Before != StateFormatChanged || !rep.Rebuilt {
				t.Errorf("report %+v, want format changed and rebuilt", rep)
			}
			checkSearch(t, ix)
			ix2, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			ix2.Close()
		})
	}
}

// TestCrashBeforeSwap simulates a build killed before the manifest swap: a
// partial newer generation sits next to the current one. Open serves the
// current one; the next build skips the partial one's number and removes it.
func TestCrashBeforeSwap(t *testing.T) {
	dir := t.TempDir()
	ix, _ := mustEnsure(t, dir, testTools(), newCaching("fake/1"))
	ix.Close()
	ixDir := dir
	partial := genDir(ixDir, 2)
	os.MkdirAll(filepath.Join(partial, bleveSubdir), 0o755)
	os.WriteFile(filepath.Join(partial, catalogFile), []byte(`[{"server":"half`), 0o644)
	os.WriteFile(filepath.Join(ixDir, manifestFile+".tmp"), []byte(`{"format":1,"generation":2`), 0o644)

	ix, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSearch(t, ix)
	ix.Close()

	changed := append(testTools(), catalog.Tool{Server: "x", Name: "y", Description: "new"})
	_, rep := mustEnsure(t, dir, changed, newCaching("fake/1"))
	if rep.Generation != 3 || rep.Before != StateCatalogChanged {
		t.Errorf("after crash: %+v", rep)
	}
	assertGenerations(t, dir, 3)
}

func TestLockContention(t *testing.T) {
	dir := t.TempDir()
	ixDir := dir
	os.MkdirAll(ixDir, 0o755)
	unlock, err := lockDir(ixDir)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Ensure(context.Background(), dir, testTools(), nil, nil)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "another `toolgate index`") {
		t.Errorf("Ensure under lock: %v", err)
	}
	// With LockWait, Ensure waits for the holder to finish.
	waits := lockWaits.Load()
	done := make(chan error, 1)
	go func() {
		ix, _, err := Ensure(context.Background(), dir, testTools(), nil, &Options{LockWait: time.Minute})
		if err == nil {
			ix.Close()
		}
		done <- err
	}()
	testenv.Eventually(t, "Ensure waiting for the lock", func() bool { return lockWaits.Load() > waits })
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("Ensure with LockWait: %v", err)
	}
}

// TestConcurrentReaders opens the index from many goroutines while a builder
// swaps generations (run with -race).
func TestConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	ix, _ := mustEnsure(t, dir, testTools(), nil)
	ix.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				ix, err := Open(dir, nil)
				if err != nil {
					errs <- err
					return
				}
				if _, err := ix.Keyword("read", 3, ""); err != nil {
					errs <- err
				}
				ix.Close()
			}
		}()
	}
	for i := 0; i < 5; i++ {
		tools := append(testTools(), catalog.Tool{Server: "s", Name: "t" + string(rune('a'+i)), Description: "x"})
		ix, _, err := Ensure(context.Background(), dir, tools, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ix.Close()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBuildWritesNothingInTempDir: Bleve's builder makes its scratch folder
// in $TMPDIR by default and renames the segment out of it, which fails
// where $TMPDIR is another file system (a tmpfs /tmp); the build keeps it
// inside the generation instead. Here $TMPDIR does not exist, so a build
// that used it would fail.
func TestBuildWritesNothingInTempDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	mustEnsure(t, dir, syntheticTools(50), nil)
	matches, _ := filepath.Glob(filepath.Join(dir, "gen-1", "*"))
	for i, m := range matches {
		matches[i] = filepath.Base(m)
	}
	if diff := cmp.Diff([]string{bleveSubdir, catalogFile}, matches); diff != "" {
		t.Errorf("generation folder (-want +got):\n%s", diff)
	}
}

// TestEnsureEmptyCatalog: a catalog without tools (every backend down at a
// cold start, an empty tools file) gets an index that opens and answers
// nothing. Bleve's builder panics on an empty build, so it is not used.
func TestEnsureEmptyCatalog(t *testing.T) {
	dir := t.TempDir()
	ix, rep := mustEnsure(t, dir, []catalog.Tool{}, newCaching("m"))
	if ix.Len() != 0 || !rep.Rebuilt {
		t.Fatalf("empty catalog: %d tools, rebuilt %v", ix.Len(), rep.Rebuilt)
	}
	if hits, err := ix.Keyword("anything", 5, ""); err != nil || len(hits) != 0 {
		t.Errorf("Keyword on an empty index = %v, %v", hits, err)
	}
	again, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("Open of the empty index: %v", err)
	}
	again.Close()
	// The next catalog updates it like any other.
	ix2, rep2 := mustEnsure(t, dir, []catalog.Tool{{Server: "s", Name: "t", Description: "a tool"}}, newCaching("m"))
	if ix2.Len() != 1 || rep2.Before != StateCatalogChanged {
		t.Errorf("after the empty index: %d tools, state %s", ix2.Len(), rep2.Before)
	}
}

// TestAnnotationsKept: annotations are stored in the catalog snapshot and
// come back from a reopened index; a change of annotations alone is a new
// catalog (served from the next generation) that embeds nothing, and an
// index whose snapshot predates annotations (format 3) is rebuilt.
func TestAnnotationsKept(t *testing.T) {
	dir := t.TempDir()
	emb := newCaching("fake/1")
	tools := testTools()
	tools[0].Annotations = []byte(`{"readOnlyHint":true,"idempotentHint":false}`)
	ix, _ := mustEnsure(t, dir, tools, emb)
	ix.Close()
	ix2, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix2.Close()
	got, ok := ix2.Tool(tools[0].ID())
	if !ok || string(got.Annotations) != string(tools[0].Annotations) {
		t.Errorf("reopened %s: annotations %s, want %s", tools[0].ID(), got.Annotations, tools[0].Annotations)
	}

	changed := testTools()
	changed[0].Annotations = []byte(`{"readOnlyHint":false,"destructiveHint":true}`)
	misses := emb.misses
	ix3, rep := mustEnsure(t, dir, changed, emb)
	if rep.Before != StateCatalogChanged || rep.Changed != 1 || emb.misses != misses {
		t.Errorf("annotations changed: %+v, texts embedded %d", rep, emb.misses-misses)
	}
	if got, _ := ix3.Tool(changed[0].ID()); string(got.Annotations) != string(changed[0].Annotations) {
		t.Errorf("after the change: annotations %s, want %s", got.Annotations, changed[0].Annotations)
	}

	// A format-3 index: manifest format 3, snapshot "TGC1".
	old := t.TempDir()
	ix4, _ := mustEnsure(t, old, tools, emb)
	ix4.Close()
	m, err := readManifest(old)
	if err != nil {
		t.Fatal(err)
	}
	m.Format = 3
	if err := writeManifest(old, m); err != nil {
		t.Fatal(err)
	}
	_, rep = mustEnsure(t, old, tools, emb)
	if rep.Before != StateFormatChanged || !rep.Rebuilt {
		t.Errorf("format-3 index: %+v, want format changed and rebuilt", rep)
	}
}

// An index an older toolgate made (another format) is rebuilt with a log
// line that says so, at INFO: an upgrade's expected rebuild read
// "unreadable or from another format" as a warning. A manifest that does
// not read is still a warning that says so.
func TestEnsureSaysAnOlderFormat(t *testing.T) {
	emb := newCaching("fake/1")
	for _, tc := range []struct {
		name     string
		manifest func(m *Manifest) []byte
		want     string
	}{
		{"older format", func(m *Manifest) []byte {
			m.Format = FormatVersion - 1
			b, _ := json.Marshal(m)
			return b
		}, fmt.Sprintf(`level=INFO msg="index on disk is from another toolgate version; rebuilding it" format=%d this_version_reads=%d`, FormatVersion-1, FormatVersion)},
		{"newer format", func(m *Manifest) []byte {
			m.Format = FormatVersion + 1
			b, _ := json.Marshal(m)
			return b
		}, fmt.Sprintf(`level=INFO msg="index on disk is a newer toolgate's (a rollback?); rebuilding it for this one, and the newer toolgate rebuilds its own when it runs here again" format=%d this_version_reads=%d`, FormatVersion+1, FormatVersion)},
		{"garbled manifest", func(*Manifest) []byte { return []byte("{not json") },
			`level=WARN msg="index on disk is unreadable; rebuilding"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ix, _ := mustEnsure(t, dir, testTools(), emb)
			ix.Close()
			m, err := readManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, manifestFile), tc.manifest(m), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs testenv.LogBuffer
			ix, rep, err := EnsureReport(context.Background(), dir, testTools(), emb, &Options{Logger: logs.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			ix.Close()
			if rep.Before != StateFormatChanged || !rep.Rebuilt || !strings.Contains(logs.String(), tc.want) {
				t.Errorf("report %+v, log:\n%s\nwant %s", rep, logs.String(), tc.want)
			}
		})
	}
}

// An index rebuilt at an upgrade from the embedding cache says the model
// embedded nothing: its log said only "embedded=47", the tools sent to the
// embedder, which read as all of them embedded again.
func TestEnsureSaysWhatTheModelEmbedded(t *testing.T) {
	dir := t.TempDir()
	tools := testTools()
	emb := countingCache{newCaching("fake/1")}
	var logs testenv.LogBuffer
	build := func(what string) Report {
		t.Helper()
		ix, rep, err := EnsureReport(context.Background(), dir, tools, emb, &Options{Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		ix.Close()
		if !rep.Rebuilt {
			t.Fatalf("%s: not rebuilt: %+v", what, rep)
		}
		return rep
	}
	first := build("first build")
	_, texts := emb.Stats()
	if first.Embedded != len(tools) || first.ModelTexts != texts || texts == 0 {
		t.Errorf("first build: embedded %d, by the model %d, want %d and %d", first.Embedded, first.ModelTexts, len(tools), texts)
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Format = FormatVersion - 1 // an upgrade: rebuilt, every vector from the cache
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, manifestFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	up := build("upgrade")
	if up.Embedded != len(tools) || up.ModelTexts != 0 {
		t.Errorf("upgrade: embedded %d, by the model %d, want %d and 0", up.Embedded, up.ModelTexts, len(tools))
	}
	if want := fmt.Sprintf("embedded=%d by_model=0 ", len(tools)); !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, logs.String())
	}

	// An embedder that does not say: the log says so.
	var plain testenv.LogBuffer
	ix, rep, err := EnsureReport(context.Background(), t.TempDir(), tools, &fakeEmbedder{id: "fake/1", dim: 32}, &Options{Logger: plain.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	if rep.ModelTexts != -1 || !strings.Contains(plain.String(), "by_model=unknown") {
		t.Errorf("an embedder without a count: %+v, log:\n%s", rep, plain.String())
	}
}

// TestOutputSchemaKept: output schemas are stored in the catalog snapshot
// ("TGC3") and come back from a reopened index; a change of an output
// schema alone is a new catalog that embeds and indexes nothing again; an
// index of format 6 (snapshot "TGC2", no output schemas) is rebuilt, its
// embeddings from the cache, and does not open as this format's (a warm
// start from it would serve, and have the quarantine pin, tools without
// their output schemas).
func TestOutputSchemaKept(t *testing.T) {
	dir := t.TempDir()
	emb := newCaching("fake/1")
	tools := testTools()
	tools[0].OutputSchema = json.RawMessage(`{"type":"object","properties":{"entries":{"type":"array","items":{"type":"string"}}}}`)
	tools[3].OutputSchema = json.RawMessage(`{"type":"object","properties":{"entities":{"type":"array"}}}`)
	ix, _ := mustEnsure(t, dir, tools, emb)
	ix.Close()
	ix2, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix2.Close()
	for _, w := range tools {
		if got, _ := ix2.Tool(w.ID()); string(got.OutputSchema) != string(w.OutputSchema) {
			t.Errorf("reopened %s: output schema %s, want %s", w.ID(), got.OutputSchema, w.OutputSchema)
		}
	}

	changed := testTools()
	changed[0].OutputSchema = json.RawMessage(`{"type":"object","properties":{"names":{"type":"array"}}}`)
	changed[3].OutputSchema = tools[3].OutputSchema
	misses := emb.misses
	ix3, rep := mustEnsure(t, dir, changed, emb)
	if rep.Before != StateCatalogChanged || rep.Changed != 1 || rep.Reindexed != 0 || !rep.Incremental || emb.misses != misses {
		t.Errorf("an output schema changed: %+v, texts embedded %d; want catalog changed, 1 changed, nothing indexed or embedded", rep, emb.misses-misses)
	}
	if got, _ := ix3.Tool(changed[0].ID()); string(got.OutputSchema) != string(changed[0].OutputSchema) {
		t.Errorf("after the change: output schema %s, want %s", got.OutputSchema, changed[0].OutputSchema)
	}

	// A format-6 index: manifest format 6, snapshot "TGC2" (6 fields a tool).
	old := t.TempDir()
	ix4, _ := mustEnsure(t, old, testTools(), emb)
	ix4.Close()
	m, err := readManifest(old)
	if err != nil {
		t.Fatal(err)
	}
	m.Format = 6
	if err := writeManifest(old, m); err != nil {
		t.Fatal(err)
	}
	b := []byte("TGC2\x01")
	for _, f := range []string{"s", "t", "", "d", "", ""} {
		b = append(append(b, byte(len(f))), f...)
	}
	if err := os.WriteFile(filepath.Join(genDir(old, m.Generation), catalogFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeCatalog(b); err == nil {
		t.Error("a TGC2 snapshot decodes as this format's")
	}
	misses = emb.misses
	_, rep = mustEnsure(t, old, tools, emb)
	if rep.Before != StateFormatChanged || !rep.Rebuilt || emb.misses != misses {
		t.Errorf("format-6 index: %+v, texts embedded %d; want format changed, rebuilt from the cache", rep, emb.misses-misses)
	}
}
