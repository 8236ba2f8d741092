package search_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/search"
)

// A query about nothing in the catalog is NoMatch, with its closest tools
// still listed; one that fits is not; a named tool has confidence 1; a
// negative MinConfidence never says NoMatch. The cosine behind confidence
// does not depend on the other tools: the same hit has the same in a
// larger catalog.
func TestConfidenceAndNoMatch(t *testing.T) {
	ctx := context.Background()
	emb := &hashEmbedder{}
	for _, mode := range []search.Mode{search.ModeHybrid, search.ModeBM25} {
		e := search.New(build(t, testCatalog, emb), emb, &search.Options{Mode: mode})
		defer e.Close()
		for _, tt := range []struct {
			query   string
			noMatch bool
		}{
			{"book a flight to Paris", true},
			{"read the contents of a file", false},
			{"git_commit", false},
		} {
			res, err := e.Search(ctx, search.Query{Text: tt.query})
			if err != nil {
				t.Fatal(err)
			}
			if res.NoMatch != tt.noMatch {
				t.Errorf("%s %q: NoMatch %v, want %v (best confidence %v)", mode, tt.query, res.NoMatch, tt.noMatch, best(res))
			}
			for _, h := range res.Hits {
				if h.Confidence < 0 || h.Confidence > 1 {
					t.Errorf("%s %q: %s confidence %v outside [0,1]", mode, tt.query, h.Tool.ID(), h.Confidence)
				}
				if h.Exact && h.Confidence != 1 {
					t.Errorf("%s %q: exact hit %s confidence %v, want 1", mode, tt.query, h.Tool.ID(), h.Confidence)
				}
			}
		}
		off := search.New(build(t, testCatalog, emb), emb, &search.Options{Mode: mode, MinConfidence: -1})
		defer off.Close()
		// (BM25 alone lists only tools that share a word with the query.)
		if res, err := off.Search(ctx, search.Query{Text: "book a flight to Paris"}); err != nil || res.NoMatch || (len(res.Hits) == 0) != (mode == search.ModeBM25) {
			t.Errorf("%s, MinConfidence -1: NoMatch %v, %d hits, err %v; want hits and no NoMatch", mode, res.NoMatch, len(res.Hits), err)
		}
	}

	// The same tool, the same query: the same cosine, whatever else the
	// catalog holds.
	small := search.New(build(t, testCatalog[:3], emb), emb, nil)
	defer small.Close()
	large := search.New(build(t, testCatalog, emb), emb, nil)
	defer large.Close()
	a, _ := small.Search(ctx, search.Query{Text: "read the contents of a file", Limit: 1})
	b, _ := large.Search(ctx, search.Query{Text: "read the contents of a file", Limit: 1})
	if len(a.Hits) == 0 || len(b.Hits) == 0 || a.Hits[0].Tool.ID() != b.Hits[0].Tool.ID() {
		t.Fatalf("hits %v / %v", a.Hits, b.Hits)
	}
	if a.Hits[0].Cosine != b.Hits[0].Cosine {
		t.Errorf("cosine %v vs %v", a.Hits[0].Cosine, b.Hits[0].Cosine)
	}
}

func best(r search.Result) float64 {
	m := 0.0
	for _, h := range r.Hits {
		m = max(m, h.Confidence)
	}
	return m
}
