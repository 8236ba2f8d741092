package index

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/registry"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The filters that read Chinese, Japanese, full-width and decomposed text
// (NFC, cjk_width, cjk_bigram, and the tokenizer's CJK runs) change no
// token of the dev catalogs nor of their queries: every field of every
// tool and every query analyses to the same terms at the same positions
// as with the chain before them, so English ranking is what it was (and
// toolgate eval gives the same figures, query by query).
func TestAnalyzerUnchangedOnBench(t *testing.T) {
	dir := os.Getenv("TOOLGATE_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "bench")
	}
	before := []string{identSplitName, "to_lower", "stop_en", "stemmer_porter"}
	if !slices.Equal(analyzerFilters[3:], before) {
		t.Fatalf("analyzerFilters %v: the chain after the CJK filters is no longer %v; update this test", analyzerFilters, before)
	}
	chain := func(filters []string) func(string) string {
		a, err := custom.AnalyzerConstructor(map[string]interface{}{
			"type": custom.Name, "tokenizer": identTokenizerName, "token_filters": toAny(filters),
		}, registry.NewCache())
		if err != nil {
			t.Fatal(err)
		}
		return func(s string) string {
			var out []string
			for _, tok := range a.Analyze([]byte(s)) {
				out = append(out, fmt.Sprintf("%s@%d", tok.Term, tok.Position))
			}
			return fmt.Sprint(out)
		}
	}
	old, now := chain(before), chain(analyzerFilters)
	texts := 0
	for _, split := range []string{"azure-mcp", "metatool"} {
		tools, err := catalog.ReadFile(filepath.Join(dir, split, "tools.jsonl"))
		if err != nil {
			testenv.Require(t, fmt.Errorf("bench data missing (set TOOLGATE_BENCH_DIR): %w", err))
		}
		var all []string
		for _, tool := range tools {
			for _, v := range bleveDoc(tool) {
				if s, ok := v.(string); ok {
					all = append(all, s)
				}
			}
		}
		f, err := os.Open(filepath.Join(dir, split, "queries.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var q struct{ Query string }
			if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
				t.Fatal(err)
			}
			all = append(all, q.Query)
		}
		f.Close()
		for _, s := range all {
			texts++
			if o, n := old(s), now(s); o != n {
				t.Errorf("%s: %.80q analyses otherwise:\n before %.300s\n now    %.300s", split, s, o, n)
			}
		}
	}
	if texts < 4000 {
		t.Fatalf("compared %d texts, want the two splits' tools and queries", texts)
	}
}
