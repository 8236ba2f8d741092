package search_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

var testCatalog = []catalog.Tool{
	{Server: "fs", Name: "read_file", Description: "Read the complete contents of a file from the file system."},
	{Server: "fs", Name: "write_file", Description: "Create a new file or overwrite an existing file with new content."},
	{Server: "fs", Name: "list_directory", Description: "List all files and directories in a directory path."},
	{Server: "memory", Name: "create_entities", Description: "Create multiple new entities in the knowledge graph, e.g. people and organisations."},
	{Server: "memory", Name: "search_nodes", Description: "Search for nodes in the knowledge graph by a query."},
	{Server: "git", Name: "git_status", Description: "Show the working tree status of a git repository."},
	{Server: "git", Name: "git_commit", Description: "Record changes to the repository with a commit message."},
	{Server: "web", Name: "fetch", Description: "Fetch a URL from the internet and return its contents as markdown."},
}

func build(t testing.TB, tools []catalog.Tool, emb index.Embedder) *index.Index {
	t.Helper()
	ix, err := index.Build(context.Background(), tools, emb, nil)
	if err != nil {
		t.Fatalf("index.Build: %v", err)
	}
	return ix
}

func ids(hits []search.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Tool.ID()
	}
	return out
}

func TestSearchErrors(t *testing.T) {
	emb := &hashEmbedder{}
	e := search.New(build(t, testCatalog, emb), emb, nil)
	defer e.Close()
	for _, q := range []string{"", "   ", "\t\n"} {
		if _, err := e.Search(context.Background(), search.Query{Text: q}); !errors.Is(err, search.ErrEmptyQuery) {
			t.Errorf("Search(%q) error = %v, want ErrEmptyQuery", q, err)
		}
	}
	if _, err := e.Search(context.Background(), search.Query{Text: "file", Mode: "fancy"}); err == nil {
		t.Error("Search with an unknown mode: no error")
	}
}

// A query past MaxQueryBytes ranks by its start: what comes after (here a
// megabyte about git) changes nothing, and a cut inside a character is moved
// to its start.
func TestLongQueryRanksByItsStart(t *testing.T) {
	emb := &hashEmbedder{}
	e := search.New(build(t, testCatalog, emb), emb, nil)
	defer e.Close()
	start := "read the complete contents of a file é" + strings.Repeat("é", search.MaxQueryBytes) // é is two bytes: byte MaxQueryBytes is inside one
	long := start + strings.Repeat(" git commit repository status", 40_000)
	if utf8.ValidString(start[:search.MaxQueryBytes]) {
		t.Fatal("the test's query is not cut inside a character")
	}
	cut := strings.ToValidUTF8(start[:search.MaxQueryBytes], "")
	for _, mode := range []search.Mode{search.ModeHybrid, search.ModeBM25} {
		got, err := e.Search(context.Background(), search.Query{Text: long, Limit: 3, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		want, err := e.Search(context.Background(), search.Query{Text: cut, Limit: 3, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ids(want.Hits), ids(got.Hits)); diff != "" || got.Hits[0].Tool.Name != "read_file" {
			t.Errorf("%s: a long query ranks otherwise than its first %d bytes (-start +long):\n%s", mode, search.MaxQueryBytes, diff)
		}
	}
}

func TestSearchLimitAndServer(t *testing.T) {
	var many []catalog.Tool
	for i := range 80 {
		many = append(many, catalog.Tool{Server: fmt.Sprintf("s%d", i%2), Name: fmt.Sprintf("tool_%02d", i), Description: "read a file"})
	}
	emb := &hashEmbedder{}
	e := search.New(build(t, many, emb), emb, nil)
	defer e.Close()
	tests := []struct {
		limit, want int
		server      string
	}{
		{0, search.DefaultLimit, ""},
		{3, 3, ""},
		{60, 60, ""}, // no cap of its own: the gateway bounds search_tools' limit
		{1000, 80, ""},
		{1000, 40, "s1"},
		{5, 0, "nope"},
	}
	for _, mode := range search.Modes {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%d/%s", mode, tt.limit, tt.server), func(t *testing.T) {
				res, err := e.Search(context.Background(), search.Query{Text: "read file", Limit: tt.limit, Server: tt.server, Mode: mode})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Hits) != tt.want {
					t.Errorf("got %d hits, want %d", len(res.Hits), tt.want)
				}
				for _, h := range res.Hits {
					if tt.server != "" && h.Tool.Server != tt.server {
						t.Errorf("hit %s outside server %s", h.Tool.ID(), tt.server)
					}
				}
			})
		}
	}
}

func TestSearchModes(t *testing.T) {
	emb := &hashEmbedder{}
	e := search.New(build(t, testCatalog, emb), emb, nil)
	defer e.Close()
	if d, why := e.Degraded(); d {
		t.Fatalf("Degraded() = true (%s), want false", why)
	}
	want := search.State{Mode: search.ModeHybrid, Configured: search.ModeHybrid, Model: "test/hash-bow"}
	if st := idleState(t, e); st != want {
		t.Errorf("State() = %+v, want %+v", st, want)
	}
	ctx := context.Background()
	for _, mode := range search.Modes {
		t.Run(string(mode), func(t *testing.T) {
			res, err := e.Search(ctx, search.Query{Text: "write content to a file", Mode: mode, Limit: 8})
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != mode {
				t.Errorf("Mode = %s, want %s", res.Mode, mode)
			}
			if len(res.Hits) == 0 || res.Hits[0].Tool.ID() != "fs__write_file" {
				t.Errorf("top hits %v, want fs__write_file first", ids(res.Hits))
			}
			for i, h := range res.Hits {
				if i > 0 && h.Score > res.Hits[i-1].Score {
					t.Errorf("hit %d score %v above hit %d score %v", i, h.Score, i-1, res.Hits[i-1].Score)
				}
				if h.Keyword < 0 || h.Keyword > 1 {
					t.Errorf("%s keyword %v outside [0,1]", h.Tool.ID(), h.Keyword)
				}
				switch mode {
				case search.ModeHybrid:
					if want := search.DefaultKeywordWeight*h.Keyword + search.DefaultVectorWeight*h.Vector; math.Abs(h.Score-want) > 1e-12 {
						t.Errorf("%s score %v, want %v·%v + %v·%v = %v", h.Tool.ID(), h.Score, search.DefaultKeywordWeight, h.Keyword, search.DefaultVectorWeight, h.Vector, want)
					}
				case search.ModeBM25:
					if h.Score != h.Keyword {
						t.Errorf("%s bm25 score %v != keyword %v", h.Tool.ID(), h.Score, h.Keyword)
					}
				case search.ModeVector:
					if h.Score != h.Cosine {
						t.Errorf("%s vector score %v != cosine %v", h.Tool.ID(), h.Score, h.Cosine)
					}
				}
			}
			if mode != search.ModeVector && res.Hits[0].Keyword != 1 {
				t.Errorf("best keyword hit has keyword %v, want 1 (divided by the max)", res.Hits[0].Keyword)
			}
		})
	}
}

// A hybrid hit found by the vector signal alone still carries its exact
// keyword score, and a keyword-only hit its exact cosine.
func TestHybridBreakdownIsExact(t *testing.T) {
	emb := &hashEmbedder{}
	ix := build(t, testCatalog, emb)
	e := search.New(ix, emb, &search.Options{Candidates: 2})
	defer e.Close()
	ctx := context.Background()
	q := "git repository commit message"
	res, err := e.Search(ctx, search.Query{Text: q, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	qv, _ := emb.Embed(ctx, []string{q})
	cos := map[string]float64{}
	for _, s := range ix.Nearest(qv[0], ix.Len(), "") {
		cos[s.ID] = s.Score
	}
	kw, _ := ix.Keyword(q, ix.Len(), "")
	bm := map[string]float64{}
	for _, s := range kw {
		bm[s.ID] = s.Score
	}
	bestKW := kw[0].Score
	bestCos, meanCos := math.Inf(-1), 0.0
	for _, c := range cos {
		bestCos = max(bestCos, c)
		meanCos += c / float64(len(cos))
	}
	if len(res.Hits) < 2 || len(res.Hits) > 4 {
		t.Errorf("Candidates=2: got %d hits, want 2 to 4 (two per signal)", len(res.Hits))
	}
	for _, h := range res.Hits {
		id := h.Tool.ID()
		if math.Abs(h.Cosine-cos[id]) > 1e-6 || h.BM25 != bm[id] {
			t.Errorf("%s: bm25 %v cosine %v, want %v %v", id, h.BM25, h.Cosine, bm[id], cos[id])
		}
		wantVec := max(cos[id]-meanCos, 0) / (bestCos - meanCos)
		if math.Abs(h.Keyword-bm[id]/bestKW) > 1e-9 || math.Abs(h.Vector-wantVec) > 1e-6 {
			t.Errorf("%s: keyword %v vector %v, want %v %v", id, h.Keyword, h.Vector, bm[id]/bestKW, wantVec)
		}
	}
}

func TestDegraded(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		emb  index.Embedder // engine's
		ixe  index.Embedder // index's
	}{
		{"no embedder", nil, nil},
		{"index without vectors", &hashEmbedder{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := search.New(build(t, testCatalog, tt.ixe), tt.emb, nil)
			defer e.Close()
			d, why := e.Degraded()
			if !d || why == "" {
				t.Errorf("Degraded() = %v, %q; want true and a reason", d, why)
			}
			want := search.State{Mode: search.ModeBM25, Configured: search.ModeHybrid, BM25Only: true, Reason: why}
			if st := idleState(t, e); st != want {
				t.Errorf("State() = %+v, want %+v", st, want)
			}
			for _, mode := range search.Modes {
				res, err := e.Search(ctx, search.Query{Text: "read a file", Mode: mode})
				if err != nil {
					t.Fatal(err)
				}
				if res.Mode != search.ModeBM25 {
					t.Errorf("%s: Mode = %s, want bm25", mode, res.Mode)
				}
				if len(res.Hits) == 0 || res.Hits[0].Tool.ID() != "fs__read_file" {
					t.Errorf("%s: hits %v, want fs__read_file first", mode, ids(res.Hits))
				}
			}
		})
	}
}

// The engine warns that it runs BM25 only when its mode needs vectors:
// one whose mode is bm25 lacks nothing (toolgate eval --mode bm25 warned
// "search runs BM25 only" of the mode it was asked).
func TestDegradedWarnsOnlyWhenVectorsAreNeeded(t *testing.T) {
	for _, tt := range []struct {
		mode  search.Mode
		warns int
	}{{search.ModeBM25, 0}, {search.ModeHybrid, 1}} {
		var warns countWarns
		e := search.New(build(t, testCatalog, nil), nil, &search.Options{Mode: tt.mode, Logger: slog.New(&warns)})
		e.Close()
		if got := int(warns.n.Load()); got != tt.warns {
			t.Errorf("mode %s: %d warnings, want %d", tt.mode, got, tt.warns)
		}
	}
}

// countWarns is a slog handler that counts the records at level warn and
// above.
type countWarns struct{ n atomic.Int32 }

func (c *countWarns) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c *countWarns) Handle(context.Context, slog.Record) error    { c.n.Add(1); return nil }
func (c *countWarns) WithAttrs([]slog.Attr) slog.Handler           { return c }
func (c *countWarns) WithGroup(string) slog.Handler                { return c }

// notLoaded is an embedder whose model is not loaded (embed.Embedder
// before `toolgate models fetch`): it says why through LoadError.
type notLoaded struct{ failingEmbedder }

func (n *notLoaded) LoadError() error { return errors.New(*n.why.Load()) }

// State names the embedder's own reason (what is missing and the command
// that installs it) over its consequence, and a configured BM25 is no
// degradation.
func TestStateReason(t *testing.T) {
	const why = "model file not found at /m/model.onnx: install it with toolgate models fetch"
	emb := &notLoaded{}
	emb.fail(why)
	e := search.New(build(t, testCatalog, nil), emb, nil)
	defer e.Close()
	want := search.State{Mode: search.ModeBM25, Configured: search.ModeHybrid, BM25Only: true, Reason: why}
	if st := idleState(t, e); st != want {
		t.Errorf("State() = %+v, want %+v", st, want)
	}
	bm := search.New(build(t, testCatalog, nil), nil, &search.Options{Mode: search.ModeBM25})
	defer bm.Close()
	if st, want := idleState(t, bm), (search.State{Mode: search.ModeBM25, Configured: search.ModeBM25}); st != want {
		t.Errorf("configured bm25: State() = %+v, want %+v", st, want)
	}
}

// A warm start whose model files broke since the index was built (removed,
// cut short): the index served has its vectors, but no query can be
// embedded, so State says BM25 and why before the first search does; it
// said hybrid until a search failed to embed (GET /status, toolgate status
// and toolgate_search_bm25_only all read it).
func TestStateModelNotLoadedOverIndexWithVectors(t *testing.T) {
	const why = "open model /m/model.onnx: Protobuf parsing failed. (re-fetch it with toolgate models fetch)"
	emb := &notLoaded{}
	emb.fail(why)
	e := search.New(build(t, testCatalog, &hashEmbedder{}), emb, nil)
	defer e.Close()
	want := search.State{Mode: search.ModeBM25, Configured: search.ModeHybrid, BM25Only: true, Reason: why}
	if st := idleState(t, e); st != want {
		t.Errorf("State() = %+v, want %+v", st, want)
	}
}

// failingEmbedder fails each Embed with the error it holds, and works
// like hashEmbedder while it holds none.
type failingEmbedder struct {
	hashEmbedder
	why atomic.Pointer[string]
}

func newFailingEmbedder(why string) *failingEmbedder {
	f := &failingEmbedder{}
	f.fail(why)
	return f
}

func (f *failingEmbedder) fail(why string) { f.why.Store(&why) }

func (f *failingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if why := *f.why.Load(); why != "" {
		return nil, errors.New(why)
	}
	return f.hashEmbedder.Embed(ctx, texts)
}

// A query that cannot be embedded is answered with BM25 alone, and the log
// says so once per error (a model not installed fails every search), and
// once when embedding works again.
func TestEmbedFailureFallsBackToBM25(t *testing.T) {
	logs := &testenv.LogBuffer{}
	emb := newFailingEmbedder("onnx exploded")
	e := search.New(build(t, testCatalog, &hashEmbedder{}), emb, &search.Options{Logger: logs.Logger()})
	defer e.Close()
	ask := func(want search.Mode) {
		t.Helper()
		res, err := e.Search(context.Background(), search.Query{Text: "read a file"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Mode != want || len(res.Hits) == 0 {
			t.Errorf("got mode %s with %d hits, want %s with hits", res.Mode, len(res.Hits), want)
		}
	}
	said := func(what string, want int) {
		t.Helper()
		if n := strings.Count(logs.String(), what); n != want {
			t.Errorf("the log says %q %d times, want %d:\n%s", what, n, want, logs)
		}
	}
	state := func(bm25Only bool, reason string) {
		t.Helper()
		if st := e.State(); st.BM25Only != bm25Only || st.Reason != reason {
			t.Errorf("State() = %+v, want BM25Only %v and reason %q", st, bm25Only, reason)
		}
	}
	state(false, "") // nothing asked yet
	for range 3 {
		ask(search.ModeBM25)
	}
	said("embed query failed", 1)
	state(true, "embedding the last query failed: onnx exploded")
	emb.fail("model file not found")
	ask(search.ModeBM25)
	said("embed query failed", 2)
	emb.fail("")
	ask(search.ModeHybrid)
	ask(search.ModeHybrid)
	said("query embedding works again", 1)
	state(false, "")
	emb.fail("onnx exploded")
	ask(search.ModeBM25)
	said("embed query failed", 3)
}

func TestToolAndIDs(t *testing.T) {
	e := search.New(build(t, testCatalog, nil), nil, nil)
	defer e.Close()
	want := make([]string, len(testCatalog))
	for i, tl := range testCatalog {
		want[i] = tl.ID()
	}
	if diff := cmp.Diff(want, e.IDs(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("IDs() (-want +got):\n%s", diff)
	}
	if tl, ok := e.Tool("memory__create_entities"); !ok || tl.Name != "create_entities" {
		t.Errorf("Tool(memory__create_entities) = %v, %v", tl, ok)
	}
	if _, ok := e.Tool("memory__nope"); ok {
		t.Error("Tool(memory__nope) found")
	}
}

// Swap under concurrent searches: run with -race. Every search sees either
// the old or the new testCatalog, never a mix or a closed index.
func TestSwapConcurrent(t *testing.T) {
	a := testCatalog[:4]
	b := testCatalog[4:]
	e := search.New(build(t, a, nil), nil, nil)
	defer e.Close()
	ixs := []*index.Index{build(t, b, nil), build(t, a, nil), build(t, b, nil), build(t, a, nil)}
	inA := func(h search.Hit) bool { return h.Tool.Server == "fs" || h.Tool.Name == "create_entities" }
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := e.Search(context.Background(), search.Query{Text: "file graph git repository fetch", Limit: 10})
				if err != nil {
					errs <- err
					return
				}
				if len(res.Hits) == 0 {
					errs <- errors.New("no hits")
					return
				}
				for _, h := range res.Hits {
					if inA(h) != inA(res.Hits[0]) {
						errs <- fmt.Errorf("mixed catalogs in one result: %v", ids(res.Hits))
						return
					}
				}
				_ = e.IDs()
			}
		})
	}
	for _, ix := range ixs {
		e.Swap(ix)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(e.IDs()); got != 4 {
		t.Errorf("after swaps: %d IDs, want 4", got)
	}
}

func BenchmarkSearch(b *testing.B) {
	emb := &hashEmbedder{}
	var tools []catalog.Tool
	for i := range 500 {
		tl := testCatalog[i%len(testCatalog)]
		tl.Name = fmt.Sprintf("%s_%d", tl.Name, i)
		tools = append(tools, tl)
	}
	e := search.New(build(b, tools, emb), emb, nil)
	defer e.Close()
	for _, mode := range search.Modes {
		b.Run(string(mode), func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Search(context.Background(), search.Query{Text: "write content to a new file", Mode: mode}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Swap closes the old index once no search holds it, and Close the current
// one; a closed Bleve index refuses searches.
func TestSwapClosesOld(t *testing.T) {
	old, cur := build(t, testCatalog, nil), build(t, testCatalog, nil)
	e := search.New(old, nil, nil)
	if _, err := old.Keyword("file", 5, ""); err != nil {
		t.Fatalf("before swap: %v", err)
	}
	e.Swap(cur)
	if _, err := old.Keyword("file", 5, ""); err == nil {
		t.Error("old index still open after Swap")
	}
	if _, err := e.Search(context.Background(), search.Query{Text: "file"}); err != nil {
		t.Errorf("search after swap: %v", err)
	}
	e.Close()
	if _, err := cur.Keyword("file", 5, ""); err == nil {
		t.Error("current index still open after Close")
	}
	if _, err := e.Search(context.Background(), search.Query{Text: "file"}); err == nil {
		t.Error("search after Close: no error")
	}
}

func TestBadOptionsFallBack(t *testing.T) {
	emb := &hashEmbedder{}
	e := search.New(build(t, testCatalog, emb), emb, &search.Options{Mode: "fancy", VectorNorm: "log", KeywordNorm: "exp"})
	defer e.Close()
	o := e.Options()
	if o.Mode != search.ModeHybrid || o.VectorNorm != search.NormMean || o.KeywordNorm != search.NormMax {
		t.Errorf("options = %+v, want defaults for the bad values", o)
	}
	res, err := e.Search(context.Background(), search.Query{Text: "read a file"})
	if err != nil || res.Mode != search.ModeHybrid || len(res.Hits) == 0 || res.Hits[0].Score == 0 {
		t.Errorf("Search = %+v, %v", res, err)
	}
}

// TestReconfigure: new options (a config reload) rank the next search: the
// mode, the weights and the confidence a hit needs; the usage stays the
// engine's, and what cannot be used falls back as in New.
func TestReconfigure(t *testing.T) {
	emb := &hashEmbedder{}
	u := &noPairs{}
	e := search.New(build(t, testCatalog, emb), emb, &search.Options{Usage: u})
	defer e.Close()
	ctx := context.Background()
	q := search.Query{Text: "write content to a file", Limit: 3}
	res, err := e.Search(ctx, q)
	if err != nil || res.Mode != search.ModeHybrid || res.NoMatch {
		t.Fatalf("before: mode %s noMatch %v, %v", res.Mode, res.NoMatch, err)
	}

	e.Reconfigure(&search.Options{Mode: search.ModeBM25, MinConfidence: 0.999})
	if o := e.Options(); o.Mode != search.ModeBM25 || o.MinConfidence != 0.999 || o.Usage != u || o.Candidates != search.DefaultCandidates {
		t.Errorf("options after Reconfigure = %+v, want bm25, 0.999, the engine's usage and defaults", o)
	}
	if st := e.State(); st.Configured != search.ModeBM25 || st.BM25Only {
		t.Errorf("State after Reconfigure = %+v, want configured bm25 and not degraded", st)
	}
	res, err = e.Search(ctx, q)
	if err != nil || res.Mode != search.ModeBM25 || !res.NoMatch {
		t.Errorf("after: mode %s noMatch %v, %v; want bm25 and noMatch", res.Mode, res.NoMatch, err)
	}

	e.Reconfigure(&search.Options{KeywordWeight: 1, VectorWeight: 0, MinConfidence: -1, Mode: "fancy"})
	res, err = e.Search(ctx, q)
	if err != nil || res.Mode != search.ModeHybrid || res.NoMatch || len(res.Hits) == 0 {
		t.Fatalf("weights 1/0: mode %s noMatch %v, %v", res.Mode, res.NoMatch, err)
	}
	for _, h := range res.Hits {
		if h.Score != h.Keyword {
			t.Errorf("%s: score %v with weights 1/0, want its keyword %v", h.Tool.ID(), h.Score, h.Keyword)
		}
	}
}

// noPairs is a Usage that has learned nothing.
type noPairs struct{}

func (*noPairs) Generation() uint64        { return 0 }
func (*noPairs) Pairs() []search.UsagePair { return nil }

// idleState is e.State() of an engine no search runs on: none running or
// waiting, and at least two slots; those counts are then zeroed, for
// comparing the rest.
func idleState(t *testing.T, e *search.Engine) search.State {
	t.Helper()
	st := e.State()
	if st.Running != 0 || st.Waiting != 0 || st.Slots < 2 {
		t.Errorf("State() of an idle engine: running %d, waiting %d, slots %d; want 0, 0 and at least 2", st.Running, st.Waiting, st.Slots)
	}
	st.Running, st.Waiting, st.Slots = 0, 0, 0
	return st
}
