package search_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// Search fetches each signal's top hits only and scores the other signal's
// candidates one by one; SearchWhole (export_test.go) ranks from the whole
// catalog's lists, as Search did before. They must agree hit for hit and
// bit for bit, in every mode, limit, server filter and normalisation.
func TestPrunedMatchesWhole(t *testing.T) {
	tools := indextest.Catalog(1200, indextest.Seed)
	// Copies under other servers: every copied tool ties with its
	// original in BM25 (unless the query names a server) and often in
	// cosine, so ties straddle every cut-off.
	for _, tl := range tools[:300] {
		tl.Server = "zz-" + tl.Server
		tools = append(tools, tl)
	}
	emb := &hashEmbedder{}
	ix := build(t, tools, emb)
	var texts []string
	n := 24
	if raceEnabled {
		n = 4 // -race makes each whole-catalog search ~10× slower
	}
	for _, q := range indextest.Queries(tools, n, indextest.Seed) {
		texts = append(texts, q.Text)
	}
	texts = append(texts, "list", "get the", "zz github", "qqqq zzzz", "create issue github", "the")
	servers := []string{"", tools[0].Server, "zz-" + tools[0].Server}
	opts := map[string]*search.Options{
		"default":      nil,
		"pool 7":       {Candidates: 7},
		"keyword mean": {KeywordNorm: search.NormMean},
		"minmax/max":   {KeywordNorm: search.NormMinMax, VectorNorm: search.NormMax},
	}
	for name, o := range opts {
		e := search.New(ix, emb, o)
		t.Run(name, func(t *testing.T) {
			comparePruned(t, e, texts, servers, []int{1, 5, 50}, nil)
		})
	}
	// A caller's scope (gateway/policy): the best of the tools it lets
	// through, as the whole catalog ranks them.
	e := search.New(ix, emb, nil)
	t.Run("filtered", func(t *testing.T) {
		comparePruned(t, e, texts[:max(len(texts)/3, 6)], servers, []int{1, 5, 50}, testFilters(tools))
	})
}

// testFilters are caller scopes of every shape: a few tools, all but a
// few, whole servers, servers cut tool by tool, nothing, everything.
func testFilters(tools []catalog.Tool) map[string]*search.Filter {
	nine := map[string]bool{}
	for i := 0; len(nine) < 9; i += len(tools) / 9 {
		nine[tools[i].ID()] = true
	}
	return map[string]*search.Filter{
		"nine of all":  search.NewFilter(func(t catalog.Tool) bool { return nine[t.ID()] }),
		"all but nine": search.NewFilter(func(t catalog.Tool) bool { return !nine[t.ID()] }),
		"zz servers":   search.NewFilter(func(t catalog.Tool) bool { return strings.HasPrefix(t.Server, "zz-") }),
		"cut servers": search.NewFilter(func(t catalog.Tool) bool {
			return len(t.Server)%2 == 0 && len(t.Name)%3 != 0 || strings.HasPrefix(t.Server, "zz-")
		}),
		"nothing":    search.NewFilter(func(catalog.Tool) bool { return false }),
		"everything": search.NewFilter(func(catalog.Tool) bool { return true }),
	}
}

// The same on the bench splits with the real model (its embeddings come
// from the golden test's cache).
func TestPrunedMatchesWholeBench(t *testing.T) {
	if testing.Short() {
		t.Skip("embeds the bench splits on a cold cache; skipped with -short")
	}
	if raceEnabled {
		t.Skip("checks numbers, not concurrency (TestPrunedMatchesWhole runs under -race); it runs without -race")
	}
	emb, err := goldenEmbedder(t)
	if err != nil {
		if errors.Is(err, embed.ErrMissing) {
			testenv.Require(t, err)
		}
		t.Fatalf("load embedder: %v", err)
	}
	for _, set := range []string{"azure-mcp", "metatool"} {
		t.Run(set, func(t *testing.T) {
			tools, qs := benchSet(set)(t)
			ix, err := index.Build(context.Background(), tools, emb, nil)
			if err != nil {
				t.Fatal(err)
			}
			// SearchWhole ranks whole queries: the steps (steps.go) are
			// off here. They rank each part through the same pruned
			// lists, which this test holds for the whole query.
			e := search.New(ix, emb, &search.Options{StepWeight: -1})
			defer e.Close()
			var texts []string
			step := max(len(qs)/200, 1) // metatool has 4,220 queries
			for i := 0; i < len(qs); i += step {
				texts = append(texts, qs[i].Query)
			}
			comparePruned(t, e, texts, []string{"", tools[len(tools)/2].Server}, []int{1, 5, 10, 50}, nil)
			// A scope of a few servers and one of nine tools.
			comparePruned(t, e, texts[:len(texts)/4], []string{""}, []int{1, 5}, testFilters(tools))
		})
	}
}

// comparePruned holds Search to SearchWhole for every combination; filters
// nil means no filter, otherwise each filter in turn.
func comparePruned(t *testing.T, e *search.Engine, texts, servers []string, limits []int, filters map[string]*search.Filter) {
	t.Helper()
	ctx := context.Background()
	if filters == nil {
		filters = map[string]*search.Filter{"": nil}
	}
	for fname, f := range filters {
		for _, mode := range search.Modes {
			for _, server := range servers {
				for _, limit := range limits {
					for _, text := range texts {
						q := search.Query{Text: text, Limit: limit, Server: server, Mode: mode, Filter: f}
						got, err := e.Search(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						want, err := e.SearchWhole(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						if d := cmp.Diff(brief(want), brief(got)); d != "" {
							t.Fatalf("%s %+v: pruned differs from whole (-whole +pruned):\n%s", fname, q, d)
						}
					}
				}
			}
		}
	}
}

// scored is a Hit without the tool's text, cheap to compare.
type scored struct {
	ID                                   string
	Score, Keyword, Vector, BM25, Cosine float64
}

func brief(r search.Result) []scored {
	out := []scored{{ID: "mode " + string(r.Mode)}}
	for _, h := range r.Hits {
		out = append(out, scored{h.Tool.ID(), h.Score, h.Keyword, h.Vector, h.BM25, h.Cosine})
	}
	return out
}

// staticUsage is a fixed set of learned pairs.
type staticUsage []search.UsagePair

func (u staticUsage) Generation() uint64        { return 1 }
func (u staticUsage) Pairs() []search.UsagePair { return u }

// With learned pairs (blended vectors, the learned keyword field, the
// query shift) the pruned search still equals the whole-catalog one.
func TestPrunedMatchesWholeLearned(t *testing.T) {
	tools := indextest.Catalog(1200, indextest.Seed)
	emb := &hashEmbedder{}
	ix := build(t, tools, emb)
	qs := indextest.Queries(tools, 40, indextest.Seed)
	var usage staticUsage
	var texts []string
	for i, q := range qs {
		if i%2 == 0 {
			// Learned: the query led to a tool near its relevant one.
			usage = append(usage, search.UsagePair{Query: q.Text, Tool: tools[(i*37)%len(tools)].ID(), Weight: 1})
			continue
		}
		texts = append(texts, q.Text)
	}
	if raceEnabled {
		texts = texts[:4]
	}
	e := search.New(ix, emb, &search.Options{Usage: usage})
	defer e.Close()
	if err := e.RefreshLearned(context.Background()); err != nil {
		t.Fatal(err)
	}
	comparePruned(t, e, texts, []string{"", tools[0].Server}, []int{1, 5, 50}, nil)
	// A caller's scope, with learned tools kept and dropped.
	comparePruned(t, e, texts[:min(len(texts), 6)], []string{"", tools[0].Server}, []int{1, 5, 50}, testFilters(tools))
}
