package index_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/indextest"
)

// unitEmbedder is a hashed bag of words, unit length: enough to give the
// vector half of a synthetic index ties and spread.
type unitEmbedder struct{}

func (unitEmbedder) ModelID() string { return "test/unit" }
func (unitEmbedder) Dim() int        { return 64 }
func (unitEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 64)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			h := uint32(2166136261)
			for _, c := range []byte(w) {
				h = (h ^ uint32(c)) * 16777619
			}
			v[h%64]++
		}
		var n float32
		for _, x := range v {
			n += x * x
		}
		for j := range v {
			v[j] /= max(n, 1)
		}
		out[i] = v
	}
	return out, nil
}

// pruneIndex is a synthetic catalog plus copies of part of it under other
// servers, so equal scores straddle every cut-off.
func pruneIndex(t *testing.T) (*index.Index, []string) {
	t.Helper()
	tools := indextest.Catalog(2000, indextest.Seed)
	for _, tl := range tools[:500] {
		tl.Server = "zz-" + tl.Server
		tools = append(tools, tl)
	}
	ix, err := index.Build(context.Background(), tools, unitEmbedder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	var qs []string
	for _, q := range indextest.Queries(tools, 30, indextest.Seed) {
		qs = append(qs, q.Text)
	}
	return ix, append(qs, "list", "the get", "zz github issue")
}

// Keyword's top k is the head of the whole ranking, ties included, and
// KeywordScores gives any tool the very score the whole ranking gives it.
func TestKeywordTopAndScoresMatchWhole(t *testing.T) {
	ix, qs := pruneIndex(t)
	for _, server := range []string{"", ix.Tools()[0].Server} {
		for _, q := range qs {
			all, err := ix.Keyword(q, ix.Len(), server)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []int{1, 5, 37, 100} {
				top, err := ix.Keyword(q, k, server)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(all[:min(k, len(all))], top); d != "" {
					t.Fatalf("%q server %q k=%d: top differs from the whole ranking (-whole +top):\n%s", q, server, k, d)
				}
			}
			// Every third tool of the catalog, matching or not.
			var ids []string
			want := map[string]float64{}
			whole := map[string]float64{}
			for _, s := range all {
				whole[s.ID] = s.Score
			}
			for i, tl := range ix.Tools() {
				if i%3 == 0 {
					ids = append(ids, tl.ID())
					if s, ok := whole[tl.ID()]; ok {
						want[tl.ID()] = s
					}
				}
			}
			got, err := ix.KeywordScores(q, ids, server)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				want = nil
			}
			if len(got) == 0 {
				got = nil
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("%q server %q: KeywordScores differ from the whole ranking (-whole +restricted):\n%s", q, server, d)
			}
		}
	}
}

// Scan keeps Nearest's top k, and its sum is every cosine added up (to
// float64 rounding: CosineSum rounds once, not once a tool).
func TestScanMatchesNearest(t *testing.T) {
	ix, qs := pruneIndex(t)
	vecs, _ := unitEmbedder{}.Embed(context.Background(), qs)
	for _, pass := range []string{"exact", "8-bit first"} {
		if pass != "exact" {
			ix.PrepareScan()
		}
		testScanMatchesNearest(t, ix, vecs, pass)
	}
}

func testScanMatchesNearest(t *testing.T, ix *index.Index, vecs [][]float32, pass string) {
	for _, server := range []string{"", ix.Tools()[0].Server, "no-such-server"} {
		for i, v := range vecs {
			all := ix.Nearest(v, ix.Len(), server)
			byID := slices.Clone(all)
			slices.SortFunc(byID, func(a, b index.Scored) int { return strings.Compare(a.ID, b.ID) })
			var sum, abs float64
			for _, s := range byID {
				sum += s.Score
				abs += math.Abs(s.Score)
			}
			cs := ix.CosineSum(v, server)
			if math.Abs(cs-sum) > 1e-6*abs {
				t.Fatalf("server %q query %d: CosineSum %v, cosines add up to %v", server, i, cs, sum)
			}
			for _, k := range []int{1, 5, 100, ix.Len()} {
				t.Run(fmt.Sprintf("%s/%s/%d/k=%d", pass, server, i, k), func(t *testing.T) {
					got := ix.Scan(v, k, server)
					want := index.VectorScan{Top: all[:min(k, len(all))], Sum: cs, N: len(all)}
					if d := cmp.Diff(want, got); d != "" {
						t.Fatalf("(-nearest +scan):\n%s", d)
					}
					for _, s := range all[:min(k, len(all))] {
						if c, ok := ix.Cosine(v, s.ID); !ok || c != s.Score {
							t.Fatalf("Cosine(%s) = %v, %v; Nearest says %v", s.ID, c, ok, s.Score)
						}
					}
				})
			}
		}
	}
}
