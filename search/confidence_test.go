package search_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
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
				if h.Fits != (h.Confidence >= search.DefaultMinConfidence) {
					t.Errorf("%s %q: %s confidence %v, Fits %v", mode, tt.query, h.Tool.ID(), h.Confidence, h.Fits)
				}
			}
		}
		off := search.New(build(t, testCatalog, emb), emb, &search.Options{Mode: mode, MinConfidence: -1})
		defer off.Close()
		// (BM25 alone lists only tools that share a word with the query.)
		if res, err := off.Search(ctx, search.Query{Text: "book a flight to Paris"}); err != nil || res.NoMatch || (len(res.Hits) == 0) != (mode == search.ModeBM25) {
			t.Errorf("%s, MinConfidence -1: NoMatch %v, %d hits, err %v; want hits and no NoMatch", mode, res.NoMatch, len(res.Hits), err)
		} else if len(res.Hits) > 0 && !res.Hits[len(res.Hits)-1].Fits {
			t.Errorf("%s, MinConfidence -1: the last hit does not fit; every hit does", mode)
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

// Query.Keep (search_tools' readOnly) drops tools from the hits, and
// NoMatch is theirs: a query that one dropped tool fits, and no kept one,
// is NoMatch, where it read as a match with the kept tools' weak scores.
func TestNoMatchOfTheToolsKept(t *testing.T) {
	ctx := context.Background()
	emb := &hashEmbedder{}
	e := search.New(build(t, testCatalog, emb), emb, nil)
	defer e.Close()
	const query = "record changes to the repository with a commit message"
	all, err := e.Search(ctx, search.Query{Text: query, Limit: 50})
	if err != nil || all.NoMatch || all.Hits[0].Tool.ID() != "git__git_commit" {
		t.Fatalf("without Keep: NoMatch %v, first %v, err %v; want git__git_commit, a match", all.NoMatch, ids(all.Hits), err)
	}
	notGit := func(tool catalog.Tool) bool { return tool.Server != "git" }
	kept, err := e.Search(ctx, search.Query{Text: query, Limit: 50, Keep: notGit})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range kept.Hits {
		if !notGit(h.Tool) {
			t.Errorf("hit %s, which Keep drops", h.Tool.ID())
		}
	}
	if len(kept.Hits) == 0 || !kept.NoMatch {
		t.Errorf("with Keep: %d hits, NoMatch %v (best confidence %v); want the weak ones kept, NoMatch", len(kept.Hits), kept.NoMatch, best(kept))
	}
}
