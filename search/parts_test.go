package search_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

func TestQueryParts(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"list the files in my home folder", nil},
		{"Can you run a command to list all the running processes on my GCP VM?", nil},
		// Sentences, commas and the conjunctions split; the whole query is
		// never one of its parts.
		{"I am planning a trip. Find me a cheap flight to Lisbon, preferably in May.",
			[]string{"I am planning a trip", "Find me a cheap flight to Lisbon", "preferably in May."}},
		{"read the config file and write a summary of it to notes.txt",
			[]string{"read the config file", "write a summary of it to notes.txt"}},
		// Fragments under three words are dropped, repeats kept once.
		{"ok, so, convert text to speech, convert text to speech",
			[]string{"convert text to speech"}},
		{"  a padded query, with two parts here  ", []string{"a padded query", "with two parts here"}},
		// Numbers that "and" joins are one operand list, not two clauses.
		{"read the ideas.md file, then add 2 and 3", []string{"read the ideas.md file", "then add 2 and 3"}},
		{"pick 4 or -5 at random and tell me which", []string{"pick 4 or -5 at random", "tell me which"}},
	} {
		if got := search.QueryParts(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("QueryParts(%q) = %q, want %q", tc.query, got, tc.want)
		}
	}
	var long []string
	for i := range 20 {
		long = append(long, "part number "+strings.Repeat("x", i+1)+" here")
	}
	if got := search.QueryParts(strings.Join(long, ", ")); len(got) != 8 || got[0] != long[0] || got[7] != long[7] {
		t.Errorf("QueryParts of 20 clauses = %d parts %q, want the first 8", len(got), got)
	}
}

// countingEmbedder records the texts each Embed call asked for, and fails
// calls of more than failAbove texts when failAbove > 0.
type countingEmbedder struct {
	hashEmbedder
	mu        sync.Mutex
	calls     [][]string
	failAbove int
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	c.calls = append(c.calls, slices.Clone(texts))
	fail := c.failAbove > 0 && len(texts) > c.failAbove
	c.mu.Unlock()
	if fail {
		return nil, errors.New("embedder down")
	}
	return c.hashEmbedder.Embed(ctx, texts)
}

func (c *countingEmbedder) reset() {
	c.mu.Lock()
	c.calls = nil
	c.mu.Unlock()
}

func (c *countingEmbedder) texts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Concat(c.calls...)
}

// A query that says one thing among others: its whole vector fits nothing
// well enough, one of its clauses fits a tool. The confidence reads the
// clause (the answer is not noMatch), and the parts are embedded only when
// the whole query alone would have answered noMatch.
func TestPartsConfidence(t *testing.T) {
	tools := append(slices.Clone(testCatalog),
		catalog.Tool{Server: "voice", Name: "text_to_speech", Description: "Convert text to speech audio."})
	emb := &countingEmbedder{}
	// The steps (steps.go) embed the parts of every query of several
	// clauses: off here, where the parts serve the confidence alone.
	e := search.New(build(t, tools, emb), emb, &search.Options{StepWeight: -1})
	defer e.Close()
	ctx := context.Background()

	const rambling = "yesterday my neighbour Peter told me a very long story about his summer holiday in the mountains, with his sister, her husband and their three dogs, convert text to speech"
	whole := search.New(build(t, tools, emb), emb, &search.Options{MinConfidence: -1, StepWeight: -1})
	defer whole.Close()
	ref, err := whole.Search(ctx, search.Query{Text: rambling})
	if err != nil {
		t.Fatal(err)
	}
	if ref.Hits[0].Tool.ID() != "voice__text_to_speech" || ref.Hits[0].Confidence >= search.DefaultMinConfidence {
		t.Fatalf("the whole query: first %s at confidence %.3f; the test needs voice__text_to_speech below %.2f",
			ref.Hits[0].Tool.ID(), ref.Hits[0].Confidence, search.DefaultMinConfidence)
	}

	emb.reset()
	res, err := e.Search(ctx, search.Query{Text: rambling})
	if err != nil {
		t.Fatal(err)
	}
	if res.NoMatch || res.Hits[0].Tool.ID() != "voice__text_to_speech" || res.Hits[0].Confidence < search.DefaultMinConfidence {
		t.Fatalf("with parts: noMatch %v, first %s at %.3f; want voice__text_to_speech at ≥ %.2f",
			res.NoMatch, res.Hits[0].Tool.ID(), res.Hits[0].Confidence, search.DefaultMinConfidence)
	}
	if !slices.Equal(ids(res.Hits), ids(ref.Hits)) {
		t.Errorf("parts changed the ranking: %v, whole query %v", ids(res.Hits), ids(ref.Hits))
	}
	want := append([]string{rambling}, search.QueryParts(rambling)...)
	if got := emb.texts(); !slices.Equal(got, want) {
		t.Errorf("embedded %q, want the query then its parts %q", got, want)
	}

	// A query that passes on its own embeds no parts.
	emb.reset()
	const plain = "convert text to speech, then read it aloud to me"
	if res, err := e.Search(ctx, search.Query{Text: plain}); err != nil || res.NoMatch {
		t.Fatalf("%q: noMatch %v, err %v", plain, res.NoMatch, err)
	}
	if got := emb.texts(); !slices.Equal(got, []string{plain}) {
		t.Errorf("a confident query embedded %q, want only itself", got)
	}

	// Without a threshold (minConfidence < 0) nothing is noMatch and no
	// parts are embedded.
	emb.reset()
	if res, err := whole.Search(ctx, search.Query{Text: rambling}); err != nil || res.NoMatch {
		t.Fatalf("minConfidence -1: noMatch %v, err %v", res.NoMatch, err)
	}
	if got := emb.texts(); len(got) != 1 {
		t.Errorf("minConfidence -1 embedded %q, want only the query", got)
	}

	// When the parts cannot be embedded, the whole query's answer stands.
	emb.reset()
	emb.failAbove = 1
	res, err = e.Search(ctx, search.Query{Text: rambling})
	if err != nil {
		t.Fatalf("a failed parts embedding failed the search: %v", err)
	}
	if !res.NoMatch || res.Hits[0].Confidence != ref.Hits[0].Confidence {
		t.Errorf("parts embedding failed: noMatch %v at %.3f, want the whole query's noMatch at %.3f",
			res.NoMatch, res.Hits[0].Confidence, ref.Hits[0].Confidence)
	}
}

// queryEmbedder tells the texts embedded as queries (EmbedQueries, which
// the embedding cache lets expire) from the others (Embed).
type queryEmbedder struct {
	countingEmbedder
	queries []string
}

func (q *queryEmbedder) EmbedQueries(ctx context.Context, texts []string) ([][]float32, error) {
	q.mu.Lock()
	q.queries = append(q.queries, texts...)
	q.mu.Unlock()
	return q.hashEmbedder.Embed(ctx, texts)
}

// TestSearchEmbedsAsQueries: a search embeds its query and its parts as
// queries, and the index its tools' texts as documents.
func TestSearchEmbedsAsQueries(t *testing.T) {
	emb := &queryEmbedder{}
	e := search.New(build(t, testCatalog, emb), emb, &search.Options{MinConfidence: 1})
	defer e.Close()
	docs := len(emb.texts())
	if docs == 0 || len(emb.queries) != 0 {
		t.Fatalf("index build: %d texts embedded as documents, %d as queries; want documents only", docs, len(emb.queries))
	}
	const q = "read the config file and write a summary of it to notes.txt"
	if _, err := e.Search(context.Background(), search.Query{Text: q}); err != nil {
		t.Fatal(err)
	}
	want := append([]string{q}, search.QueryParts(q)...)
	slices.Sort(want)
	slices.Sort(emb.queries) // the parts are embedded beside the query
	if !slices.Equal(emb.queries, want) || len(emb.texts()) != docs {
		t.Errorf("search embedded %q as queries and %d more as documents; want %q as queries only", emb.queries, len(emb.texts())-docs, want)
	}
}
