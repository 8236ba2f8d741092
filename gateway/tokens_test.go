package gateway

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// compactTokenBudget is what search_tools' compact text of 10 results may
// cost a client, in tokens.
const compactTokenBudget = 1000

// TestCompactTextTokenBudget ranks the queries of the dev catalogs with the
// real model and holds the compact text of the top 10 to compactTokenBudget,
// counted as bytes/4 and with MiniLM's WordPiece tokenizer (what
// `toolgate bench` states token economy in). Besides the real answers it
// checks the worst case: the 10 tools of each catalog whose entries are the
// longest, whatever the query.
func TestCompactTextTokenBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("measures text sizes, not concurrency; it runs without -race")
	}
	e, err := embed.New(&embed.Options{ORTLib: dirs.ORTLib("", ""), ModelDir: dirs.ModelFolder("", "", dirs.Data("", ""))})
	testenv.Require(t, err)
	defer e.Close()
	for _, set := range []struct {
		name  string
		every int // every n-th query
	}{{"azure-mcp", 1}, {"metatool", 10}} {
		t.Run(set.name, func(t *testing.T) {
			dir := testenv.BenchSplit(t, set.name)
			tools, err := catalog.ReadFile(filepath.Join(dir, "tools.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			qs, err := search.LoadQueries(filepath.Join(dir, "queries.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			ix, err := index.Build(ctx, tools, e, nil)
			if err != nil {
				t.Fatal(err)
			}
			eng := search.New(ix, e, nil)
			defer eng.Close()
			g := New(eng, &fakeCaller{}, nil)

			var maxBytes, maxTok, sumTok, n int
			worst := ""
			for i := 0; i < len(qs); i += set.every {
				a := searchArgs{Query: qs[i].Query, Limit: 10, Detail: DetailCompact}
				res, err := g.search(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				if res.Mode != string(search.ModeHybrid) {
					t.Fatalf("mode %s, want hybrid", res.Mode)
				}
				txt := renderSearch(a, res, g.argCounts)
				tok := e.CountTokens(txt)
				if tok == 0 {
					t.Fatal("the tokenizer counts no tokens")
				}
				n++
				sumTok += tok
				maxBytes = max(maxBytes, len(txt))
				if tok > maxTok {
					maxTok, worst = tok, txt
				}
			}
			t.Logf("%s: %d queries, top-10 compact text: max %d bytes (%d by bytes/4), max %d WordPiece tokens, mean %d",
				set.name, n, maxBytes, maxBytes/4, maxTok, sumTok/n)
			if maxBytes/4 > compactTokenBudget || maxTok > compactTokenBudget {
				t.Errorf("top-10 compact text over %d tokens: %d bytes, %d WordPiece tokens:\n%s", compactTokenBudget, maxBytes, maxTok, worst)
			}

			// The worst case: the 10 longest entries of the catalog together.
			type entry struct {
				ft  FoundTool
				tok int
			}
			var entries []entry
			for _, tl := range tools {
				ft := FoundTool{Name: tl.ID(), Server: tl.Server, Description: tl.Description, InputSchema: schemaOrEmpty(tl.InputSchema),
					Annotations: tl.Annotations, Score: 0.123, Keyword: 0.456, Vector: 0.789}
				one := renderSearch(searchArgs{Query: "q"}, SearchResult{Tools: []FoundTool{ft}, Mode: "hybrid"}, g.argCounts)
				entries = append(entries, entry{ft, e.CountTokens(one)})
			}
			slices.SortFunc(entries, func(a, b entry) int { return b.tok - a.tok })
			var top SearchResult
			top.Mode = "hybrid"
			for _, en := range entries[:10] {
				top.Tools = append(top.Tools, en.ft)
			}
			txt := renderSearch(searchArgs{Query: "a query of about ten words that asks for something long"}, top, g.argCounts)
			tok := e.CountTokens(txt)
			t.Logf("%s: the 10 longest entries together: %d bytes (%d by bytes/4), %d WordPiece tokens", set.name, len(txt), len(txt)/4, tok)
			if len(txt)/4 > compactTokenBudget || tok > compactTokenBudget {
				t.Errorf("the 10 longest entries are over %d tokens: %d bytes, %d WordPiece tokens:\n%s", compactTokenBudget, len(txt), tok, txt)
			}
		})
	}
}
