package search_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
	"github.com/toolgate/toolgate/search/learn"
)

// learningEngine is an engine over testCatalog that learns from an
// in-memory store of pairs, both closed when the test ends.
func learningEngine(t *testing.T, emb index.Embedder) (*search.Engine, *learn.Store) {
	t.Helper()
	store, err := learn.Open("", &learn.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := search.New(build(t, testCatalog, emb), emb, &search.Options{Usage: store})
	t.Cleanup(func() { e.Close() })
	return e, store
}

// Learned pairs change the ranking; forgetting them restores the zero-shot
// ranking exactly, hit for hit and bit for bit.
func TestLearningAndResetRestoresZeroShot(t *testing.T) {
	ctx := context.Background()
	emb := &hashEmbedder{}
	e, store := learningEngine(t, emb)
	queries := []string{"note down what I found", "read a file", "save my work", "list my stuff"}
	run := func() []search.Result {
		t.Helper()
		if err := e.RefreshLearned(ctx); err != nil {
			t.Fatal(err)
		}
		var out []search.Result
		for _, q := range queries {
			for _, mode := range search.Modes {
				r, err := e.Search(ctx, search.Query{Text: q, Mode: mode, Limit: 8})
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, r)
			}
		}
		return out
	}
	zeroShot := run()

	// "note down what I found" led to memory__create_entities, twice
	// phrased: learning brings it first.
	entities := testCatalog[3]
	store.Record("note down what I found", entities)
	store.Record("jot down what I found out", entities)
	store.Record("save my work to disk", testCatalog[1])
	learned := run()
	if got := learned[2].Hits[0].Tool.ID(); got != entities.ID() { // hybrid, first query
		t.Errorf("after learning, %q ranks %s first, want %s", queries[0], got, entities.ID())
	}
	if cmp.Equal(zeroShot, learned) {
		t.Fatal("learning changed nothing")
	}

	if _, err := store.Reset(""); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(zeroShot, run()); d != "" {
		t.Errorf("after Reset the ranking is not the zero-shot one (-zero-shot +after reset):\n%s", d)
	}
}

// blockingUsage holds Pairs until released, like a slow store; reading
// is closed when a rebuild first asks for them. Its generation is that of
// its pairs.
type blockingUsage struct {
	release chan struct{}
	once    sync.Once
	reading chan struct{}
	asked   sync.Once
	mu      sync.Mutex
	gen     uint64
	pairs   []search.UsagePair
}

func newBlockingUsage(pairs ...search.UsagePair) *blockingUsage {
	return &blockingUsage{release: make(chan struct{}), reading: make(chan struct{}), gen: 1, pairs: pairs}
}

func (u *blockingUsage) unblock() { u.once.Do(func() { close(u.release) }) }

func (u *blockingUsage) set(pairs ...search.UsagePair) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.gen++
	u.pairs = pairs
}

func (u *blockingUsage) Generation() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.gen
}

func (u *blockingUsage) Pairs() []search.UsagePair {
	u.asked.Do(func() { close(u.reading) })
	<-u.release
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.pairs)
}

// learnedAnswers are the answers to query over testCatalog zero-shot and
// with pair learned; the test fails if they are the same.
func learnedAnswers(t *testing.T, emb index.Embedder, query string, pair search.UsagePair) (zeroShot, learned search.Result) {
	t.Helper()
	ctx := context.Background()
	zero := search.New(build(t, testCatalog, emb), emb, nil)
	defer zero.Close()
	zeroShot, _ = zero.Search(ctx, search.Query{Text: query})
	ready := search.New(build(t, testCatalog, emb), emb, &search.Options{Usage: &countingUsage{pairs: []search.UsagePair{pair}}})
	defer ready.Close()
	if err := ready.RefreshLearned(ctx); err != nil {
		t.Fatal(err)
	}
	learned, _ = ready.Search(ctx, search.Query{Text: query})
	if cmp.Equal(zeroShot, learned) {
		t.Fatalf("learning (%q → %s) changes nothing: the test shows nothing", pair.Query, pair.Tool)
	}
	return zeroShot, learned
}

// The first searches of an index wait (up to firstLearnedWait) for its
// learned model, so that a client's first search, asked as soon as the
// gateway answered, ranks as the same query does a moment later.
func TestFirstSearchWaitsForLearning(t *testing.T) {
	ctx := context.Background()
	emb := &hashEmbedder{}
	const query = "note down what I found"
	pair := search.UsagePair{Query: query, Tool: testCatalog[3].ID(), Weight: 1}
	_, want := learnedAnswers(t, emb, query, pair)
	defer search.WaitFirstLearned(time.Hour)()
	u := newBlockingUsage(pair)
	defer u.unblock()
	e := search.New(build(t, testCatalog, emb), emb, &search.Options{Usage: u})
	defer e.Close()
	type answer struct {
		r   search.Result
		err error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := e.Search(ctx, search.Query{Text: query})
		got <- answer{r, err}
	}()
	<-u.reading // the build started at New reads the pairs, and blocks
	select {
	case a := <-got:
		t.Fatalf("the first search answered before its learned model was built (%v)", a.err)
	default:
	}
	u.unblock()
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if d := cmp.Diff(want, a.r); d != "" {
		t.Errorf("the first search does not rank with the learned pair (-learned +got):\n%s", d)
	}
}

// Once an index has a learned model, searches never wait for a rebuild:
// while new pairs are built they rank with the previous ones, and the new
// model applies once it is ready. Nor does a first search wait longer than
// firstLearnedWait: it ranks zero-shot then.
func TestSearchDoesNotWaitForLearning(t *testing.T) {
	ctx := context.Background()
	emb := &hashEmbedder{}
	const query = "note down what I found"
	pair := search.UsagePair{Query: query, Tool: testCatalog[3].ID(), Weight: 1}
	want, learned := learnedAnswers(t, emb, query, pair)
	// rankedMeanwhile searches while u blocks the learned model's build:
	// the answer is want (zero-shot) then, and the learned one once u
	// lets the build go.
	rankedMeanwhile := func(t *testing.T, e *search.Engine, u *blockingUsage, says string) {
		t.Helper()
		got, err := e.Search(ctx, search.Query{Text: query})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s:\n%s", says, d)
		}
		u.unblock()
		testenv.Eventually(t, "the learned model applies", func() bool {
			r, err := e.Search(ctx, search.Query{Text: query})
			return err == nil && cmp.Equal(learned, r)
		})
	}

	t.Run("first search past the wait", func(t *testing.T) {
		defer search.WaitFirstLearned(0)()
		u := newBlockingUsage(pair)
		defer u.unblock()
		e := search.New(build(t, testCatalog, emb), emb, &search.Options{Usage: u})
		defer e.Close()
		rankedMeanwhile(t, e, u, "while learning is built the ranking is not zero-shot")
	})

	t.Run("new pairs", func(t *testing.T) {
		defer search.WaitFirstLearned(time.Hour)()
		u := newBlockingUsage()
		u.unblock()
		e := search.New(build(t, testCatalog, emb), emb, &search.Options{Usage: u})
		defer e.Close()
		if err := e.RefreshLearned(ctx); err != nil {
			t.Fatal(err)
		}
		// The next rebuild blocks in Pairs until released.
		u.release, u.once = make(chan struct{}), sync.Once{}
		u.reading, u.asked = make(chan struct{}), sync.Once{}
		defer u.unblock()
		u.set(pair)
		rankedMeanwhile(t, e, u, "while new pairs are built the ranking is not the previous one") // the search starts the rebuild
	})
}

// countingUsage counts the reads of its pairs.
type countingUsage struct {
	reads atomic.Int32
	pairs []search.UsagePair
}

func (u *countingUsage) Generation() uint64 { return 1 }
func (u *countingUsage) Pairs() []search.UsagePair {
	u.reads.Add(1)
	return u.pairs
}

// growingUsage is a store that pairs are added to; it counts the reads of
// its pairs (one a rebuild).
type growingUsage struct {
	mu    sync.Mutex
	pairs []search.UsagePair
	reads atomic.Int32
}

func (u *growingUsage) add(p search.UsagePair) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pairs = append(u.pairs, p)
}

func (u *growingUsage) Generation() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return uint64(len(u.pairs)) + 1
}

func (u *growingUsage) Pairs() []search.UsagePair {
	u.reads.Add(1)
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.pairs)
}

// A steady stream of new pairs, a search after each (a gateway's sessions
// one after another), rebuilds the learned model once a spacing, not after
// every pair: back to back, the rebuilds were most of serve's CPU on the
// soak. Searches meanwhile rank with the previous model, the next rebuild
// reads every pair recorded since (none is lost), and RefreshLearned does
// not wait for the spacing.
func TestLearnedRebuildsSpaced(t *testing.T) {
	defer search.SpaceLearnedRebuilds(time.Hour)()
	ctx := context.Background()
	emb := &hashEmbedder{}
	u := &growingUsage{}
	e := search.New(build(t, testCatalog, emb), emb, &search.Options{Usage: u})
	defer e.Close()
	if err := e.RefreshLearned(ctx); err != nil {
		t.Fatal(err)
	}
	reads := u.reads.Load()
	const query = "blorp the zyxquv"                   // words of no tool
	r, err := e.Search(ctx, search.Query{Text: query}) // zero-shot
	if err != nil {
		t.Fatal(err)
	}
	target := testCatalog[0]
	if r.Hits[0].Tool.ID() == target.ID() {
		target = testCatalog[1]
	}
	for i := range 50 {
		p := search.UsagePair{Query: fmt.Sprintf("open item number %d", i), Tool: testCatalog[i%len(testCatalog)].ID(), Weight: 1}
		if i >= 48 { // the last pairs decide the ranking below
			p = search.UsagePair{Query: query + []string{"", " now"}[i-48], Tool: target.ID(), Weight: 1}
		}
		u.add(p)
		r, err := e.Search(ctx, search.Query{Text: query})
		if err != nil {
			t.Fatal(err)
		}
		if r.Hits[0].Tool.ID() == target.ID() {
			t.Fatalf("after %d pairs, within the spacing, %s ranks first for %q: the model was rebuilt", i+1, target.ID(), query)
		}
	}
	if got := u.reads.Load() - reads; got != 0 {
		t.Errorf("the learned model was rebuilt %d times for 50 new pairs within the spacing, want none", got)
	}
	if err := e.RefreshLearned(ctx); err != nil {
		t.Fatal(err)
	}
	if got := u.reads.Load() - reads; got != 1 {
		t.Errorf("RefreshLearned rebuilt %d times, want once", got)
	}
	r, err = e.Search(ctx, search.Query{Text: query})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Hits[0].Tool.ID(); got != target.ID() {
		t.Errorf("after the rebuild %q ranks %s first, want %s (the last pairs lost?)", query, got, target.ID())
	}
}

// The learned model is built as soon as the engine has an index, at New
// and at each Swap, without waiting for a search to notice it missing: a
// gateway's first searches (a stdio client starts one each session) ranked
// zero-shot.
func TestLearningStartsWithTheIndex(t *testing.T) {
	emb := &hashEmbedder{}
	u := &countingUsage{pairs: []search.UsagePair{
		{Query: "note down what I found", Tool: testCatalog[3].ID(), Weight: 1},
	}}
	e := search.New(build(t, testCatalog, emb), emb, &search.Options{Usage: u})
	defer e.Close()
	testenv.Eventually(t, "the pairs read at New, no search asked", func() bool { return u.reads.Load() > 0 })
	n := u.reads.Load()
	e.Swap(build(t, testCatalog, emb))
	testenv.Eventually(t, "the pairs read again at the swap", func() bool { return u.reads.Load() > n })
}

// The query adapter carries what the learned pairs share over to a tool no
// learned query led to: queries written in a style no tool description
// has ("could you kindly please …") draw a decoy tool written that way
// until the adapter, fitted on other tools' pairs, learns that the style
// says nothing about the tool.
func TestAdapterGeneralisesToUnlearnedTools(t *testing.T) {
	ctx := context.Background()
	emb := &hashEmbedder{}
	decoy := catalog.Tool{Server: "misc", Name: "polite_reply", Description: "Could you kindly please say please: a polite reply, kindly."}
	tools := append(slices.Clone(testCatalog), decoy)
	const style = "could you kindly please "
	var usage staticUsage
	for _, p := range []struct{ query, tool string }{
		{"read the file contents", "fs__read_file"},
		{"list the directory", "fs__list_directory"},
		{"fetch this url", "web__fetch"},
		{"commit my changes", "git__git_commit"},
		{"search nodes in the graph", "memory__search_nodes"},
		{"write a new file", "fs__write_file"},
		{"create entities for people", "memory__create_entities"},
	} {
		usage = append(usage, search.UsagePair{Query: style + p.query, Tool: p.tool, Weight: 1})
	}
	query := search.Query{Text: style + "tree status", Mode: search.ModeVector}
	zero := search.New(build(t, tools, emb), emb, nil)
	defer zero.Close()
	r, err := zero.Search(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Hits[0].Tool.ID(); got != decoy.ID() {
		t.Fatalf("zero-shot, %q ranks %s first: the decoy should (the test needs it)", query.Text, got)
	}
	e := search.New(build(t, tools, emb), emb, &search.Options{Usage: usage})
	defer e.Close()
	if err := e.RefreshLearned(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = e.Search(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Hits[0].Tool.ID(); got != "git__git_status" {
		t.Errorf("learned from other tools, %q ranks %v first, want git__git_status", query.Text, ids(r.Hits))
	}
}

// recordingEmbedder is hashEmbedder with a query prefix and the embedding
// cache's two ways in: Embed (tool texts, kept for good) and EmbedQueries
// (queries, which expire). It records the texts each was asked for.
type recordingEmbedder struct {
	hashEmbedder
	mu                    sync.Mutex
	texts, queries, known []string
}

func (r *recordingEmbedder) QueryPrefix() string { return "query: " }

func (r *recordingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	r.mu.Lock()
	r.texts = append(r.texts, texts...)
	r.mu.Unlock()
	return r.hashEmbedder.Embed(ctx, texts)
}

func (r *recordingEmbedder) EmbedQueries(ctx context.Context, texts []string) ([][]float32, error) {
	r.mu.Lock()
	r.queries = append(r.queries, texts...)
	r.mu.Unlock()
	return r.hashEmbedder.Embed(ctx, texts)
}

// EmbedKnownQueries records the texts as queries, and as known ones.
func (r *recordingEmbedder) EmbedKnownQueries(ctx context.Context, texts []string) ([][]float32, error) {
	r.mu.Lock()
	r.known = append(r.known, texts...)
	r.mu.Unlock()
	return r.EmbedQueries(ctx, texts)
}

// In bm25 mode the learned model embeds no learned query (no search reads
// their vectors, and serve loads no model in that mode until one does);
// a reconfigure to hybrid rebuilds it with them. A warm start in bm25 mode
// on an index with vectors embedded them, which loaded the model.
func TestBM25ModeLearnsWithoutVectors(t *testing.T) {
	ctx := context.Background()
	emb := &recordingEmbedder{}
	store, err := learn.Open("", &learn.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const q = "note down what I found"
	store.Record(q, testCatalog[3])
	e := search.New(build(t, testCatalog, emb), emb, &search.Options{Mode: search.ModeBM25, Usage: store})
	defer e.Close()
	if err := e.RefreshLearned(ctx); err != nil {
		t.Fatal(err)
	}
	embedded := func() bool {
		emb.mu.Lock()
		defer emb.mu.Unlock()
		return slices.Contains(emb.queries, "query: "+q)
	}
	if embedded() {
		t.Fatal("bm25 mode embedded a learned query")
	}
	r, err := e.Search(ctx, search.Query{Text: q})
	if err != nil || len(r.Hits) == 0 || r.Hits[0].Tool.ID() != testCatalog[3].ID() {
		t.Errorf("bm25 search of a learned query: %v %v, want %s first (the learned keyword field)", err, ids(r.Hits), testCatalog[3].ID())
	}
	e.Reconfigure(&search.Options{Mode: search.ModeHybrid})
	testenv.Eventually(t, "the learned query embedded after the reconfigure to hybrid", embedded)
}

// The learned model embeds its queries as queries (EmbedQueries), with the
// prefix and without: through Embed the embedding cache kept each learned
// query's vector for good, so it grew by one vector (1.5 KiB) for every
// distinct query ever learned — pairs the per-tool cap or decay had
// dropped long since included — and by a second once the query's own
// vector (the search's) expired and the model embedded it again.
func TestLearnedQueriesEmbeddedAsQueries(t *testing.T) {
	ctx := context.Background()
	emb := &recordingEmbedder{}
	e, store := learningEngine(t, emb)
	emb.texts = nil // the catalog's, embedded by the build
	learned := map[string]bool{}
	for i := range 3 * learn.MaxQueriesPerTool {
		q := fmt.Sprintf("note down finding number %d", i)
		store.Record(q, testCatalog[i%len(testCatalog)])
		learned[q], learned["query: "+q] = true, true
		if i%50 == 0 {
			if err := e.RefreshLearned(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.RefreshLearned(ctx); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, text := range emb.texts {
		if learned[text] {
			kept = append(kept, text)
		}
	}
	if len(kept) > 0 {
		t.Errorf("%d learned queries embedded as tool texts (kept for good), e.g. %q", len(kept), kept[0])
	}
	asQueries := 0
	for _, text := range emb.queries {
		if learned[text] {
			asQueries++
		}
	}
	if asQueries == 0 {
		t.Error("no learned query embedded through EmbedQueries")
	}
	// As known queries: storing them spends none of the embedding cache's
	// daily bound on clients' new queries (embed.Cached.EmbedKnownQueries).
	for _, text := range emb.queries {
		if learned[text] && !slices.Contains(emb.known, text) {
			t.Fatalf("learned query %q embedded as a client's new query, not a known one", text)
		}
	}
}
