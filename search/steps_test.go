package search_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// A request of two steps: the whole query's keyword half and its one
// vector favour the first step's tools, and the second step's tool ranks
// only when the parts are ranked too (steps.go).
func TestSteps(t *testing.T) {
	ctx := context.Background()
	tools := append(slices.Clone(testCatalog),
		catalog.Tool{Server: "git", Name: "git_log", Description: "Show the commit logs of the git repository."},
		catalog.Tool{Server: "git", Name: "git_diff", Description: "Show the changes between the working tree and the index of the repository."},
		catalog.Tool{Server: "git", Name: "git_branch", Description: "List the branches of the git repository."},
		catalog.Tool{Server: "git", Name: "git_add", Description: "Add file contents of the working tree to the index of the repository."})
	emb := &countingEmbedder{}
	steps := search.New(build(t, tools, emb), emb, nil)
	defer steps.Close()
	off := search.New(build(t, tools, emb), emb, &search.Options{StepWeight: -1})
	defer off.Close()

	const q = "show the status of the git repository and the working tree, then fetch a url"
	if parts := search.QueryParts(q); len(parts) < 2 {
		t.Fatalf("QueryParts(%q) = %q: the test needs two parts or more", q, parts)
	}
	ref, err := off.Search(ctx, search.Query{Text: q, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids(ref.Hits), "web__fetch") {
		t.Fatalf("whole query alone already ranks web__fetch in its top 3 (%v): the test needs it below", ids(ref.Hits))
	}
	res, err := steps.Search(ctx, search.Query{Text: q, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := ids(res.Hits)
	if got[0] != ref.Hits[0].Tool.ID() || res.Hits[0].Clause != "" || res.Hits[0].Score != ref.Hits[0].Score {
		t.Errorf("first hit %s (clause %q, score %v), want the whole query's %s (score %v)",
			got[0], res.Hits[0].Clause, res.Hits[0].Score, ref.Hits[0].Tool.ID(), ref.Hits[0].Score)
	}
	i := slices.Index(got, "web__fetch")
	if i < 0 {
		t.Fatalf("steps: top 3 %v, want web__fetch (the second step's tool) in it", got)
	}
	h := res.Hits[i]
	if !strings.Contains(h.Clause, "fetch a url") {
		t.Errorf("web__fetch clause %q, want the part that asks for it", h.Clause)
	}
	o := steps.Options()
	if want := o.StepWeight * (o.KeywordWeight*h.Keyword + o.VectorWeight*h.Vector); math.Abs(h.Score-want) > 1e-9 {
		t.Errorf("web__fetch score %v, want StepWeight × its part's fused score = %v", h.Score, want)
	}

	// The server argument holds for the parts too.
	res, err = steps.Search(ctx, search.Query{Text: q, Server: "git"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		if h.Tool.Server != "git" {
			t.Errorf("server git: hit %s (clause %q)", h.Tool.ID(), h.Clause)
		}
	}

	// A named tool stays first.
	const named = "git_commit the changes, then fetch the url of the release notes"
	res, err = steps.Search(ctx, search.Query{Text: named})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Hits[0].Exact || res.Hits[0].Tool.ID() != "git__git_commit" {
		t.Errorf("%q: first %s (exact %v), want git__git_commit named", named, res.Hits[0].Tool.ID(), res.Hits[0].Exact)
	}

	// One clause, BM25 mode, or parts that cannot be embedded: the whole
	// query's ranking, bit for bit.
	emb.failAbove = 1
	for _, c := range []search.Query{{Text: "read a file from the file system"}, {Text: q, Mode: search.ModeBM25}, {Text: q}} {
		a, err := steps.Search(ctx, c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		b, err := off.Search(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(a.Hits), ids(b.Hits)) || a.Hits[0].Score != b.Hits[0].Score {
			t.Errorf("%q (mode %q): %v, want the whole query's %v", c.Text, c.Mode, ids(a.Hits), ids(b.Hits))
		}
	}
}
