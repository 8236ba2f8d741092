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
	"github.com/toolgate/toolgate/index/catalog"
)

// testFilters are filters of every shape over the prune index: kept and
// dropped whole servers, servers cut tool by tool, few tools and most.
func testFilters(ix *index.Index) map[string]*index.Filter {
	tools := ix.Tools()
	var servers []string
	for _, t := range tools {
		if len(servers) == 0 || servers[len(servers)-1] != t.Server {
			servers = append(servers, t.Server)
		}
	}
	nine := map[string]bool{}
	for i := 0; len(nine) < 9; i += len(tools) / 9 {
		nine[tools[i].ID()] = true
	}
	half := map[string]bool{}
	for i, s := range servers {
		if i%2 == 0 {
			half[s] = true
		}
	}
	return map[string]*index.Filter{
		"nine tools":       index.NewFilter(func(t catalog.Tool) bool { return nine[t.ID()] }),
		"all but nine":     index.NewFilter(func(t catalog.Tool) bool { return !nine[t.ID()] }),
		"half the servers": index.NewFilter(func(t catalog.Tool) bool { return half[t.Server] }),
		// Whole servers kept and dropped, and each server cut: every
		// third tool of the kept half goes.
		"mixed": index.NewFilter(func(t catalog.Tool) bool {
			return half[t.Server] && len(t.Name)%3 != 0 || strings.HasPrefix(t.Server, "zz-")
		}),
		"nothing":   index.NewFilter(func(catalog.Tool) bool { return false }),
		"all":       index.NewFilter(func(catalog.Tool) bool { return true }),
		"no filter": nil,
	}
}

func filterKeeps(f *index.Filter, ix *index.Index, id string) bool {
	return ix.In(f).Has(id)
}

// A filtered keyword search is the whole ranking with the tools the filter
// drops taken out: same order, same scores bit for bit, ties included.
func TestFilteredKeywordMatchesWhole(t *testing.T) {
	ix, qs := pruneIndex(t)
	for name, f := range testFilters(ix) {
		sub := ix.In(f)
		for _, server := range []string{"", ix.Tools()[0].Server, "zz-" + ix.Tools()[0].Server} {
			for _, q := range qs {
				whole, err := ix.Keyword(q, ix.Len(), server)
				if err != nil {
					t.Fatal(err)
				}
				want := slices.DeleteFunc(whole, func(s index.Scored) bool { return !filterKeeps(f, ix, s.ID) })
				for _, k := range []int{1, 5, 37, ix.Len()} {
					got, err := sub.Keyword(q, k, server)
					if err != nil {
						t.Fatal(err)
					}
					if d := cmp.Diff(want[:min(k, len(want))], got, cmpEmpty); d != "" {
						t.Fatalf("%s: %q server %q k=%d: filtered differs from the whole ranking filtered (-whole +filtered):\n%s", name, q, server, k, d)
					}
				}
				// KeywordScores leaves out the ids the filter drops.
				var ids []string
				for i, tl := range ix.Tools() {
					if i%5 == 0 {
						ids = append(ids, tl.ID())
					}
				}
				scores, err := sub.KeywordScores(q, ids, server)
				if err != nil {
					t.Fatal(err)
				}
				for id := range scores {
					if !filterKeeps(f, ix, id) {
						t.Fatalf("%s: KeywordScores gave %s, which the filter drops", name, id)
					}
				}
			}
		}
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []index.Scored) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return slices.Equal(a, b)
})

// A filtered scan keeps the filtered Nearest's top k; its sum and count are
// those of the tools the filter keeps.
func TestFilteredScanMatchesNearest(t *testing.T) {
	ix, qs := pruneIndex(t)
	vecs, _ := unitEmbedder{}.Embed(context.Background(), qs)
	for _, pass := range []string{"exact", "8-bit first"} {
		if pass != "exact" {
			ix.PrepareScan()
		}
		for name, f := range testFilters(ix) {
			sub := ix.In(f)
			for _, server := range []string{"", ix.Tools()[0].Server, "zz-" + ix.Tools()[0].Server} {
				for i, v := range vecs[:10] {
					whole := ix.Nearest(v, ix.Len(), server)
					want := slices.DeleteFunc(whole, func(s index.Scored) bool { return !filterKeeps(f, ix, s.ID) })
					if d := cmp.Diff(want, sub.Nearest(v, ix.Len(), server), cmpEmpty); d != "" {
						t.Fatalf("%s/%s: Nearest (-whole filtered +filtered):\n%s", name, server, d)
					}
					var sum, abs float64
					byID := slices.Clone(want)
					slices.SortFunc(byID, func(a, b index.Scored) int { return strings.Compare(a.ID, b.ID) })
					for _, s := range byID {
						sum += s.Score
						abs += math.Abs(s.Score)
					}
					for _, k := range []int{1, 5, 100} {
						t.Run(fmt.Sprintf("%s/%s/%s/%d/k=%d", pass, name, server, i, k), func(t *testing.T) {
							got := sub.Scan(v, k, server)
							if got.N != len(want) {
								t.Fatalf("N = %d, want %d", got.N, len(want))
							}
							if math.Abs(got.Sum-sum) > 1e-6*abs {
								t.Fatalf("Sum = %v, cosines add up to %v", got.Sum, sum)
							}
							if d := cmp.Diff(want[:min(k, len(want))], got.Top, cmpEmpty); d != "" {
								t.Fatalf("(-nearest +scan):\n%s", d)
							}
						})
					}
				}
			}
		}
	}
}

// A filter that keeps every tool changes nothing: its searches take the
// unfiltered path, so even the catalog's cosine sum is the same number.
func TestFilterKeepingAllIsNoFilter(t *testing.T) {
	ix, qs := pruneIndex(t)
	vecs, _ := unitEmbedder{}.Embed(context.Background(), qs[:3])
	sub := ix.In(index.NewFilter(func(catalog.Tool) bool { return true }))
	if sub.Filtered() {
		t.Fatal("a filter keeping every tool reports Filtered")
	}
	for _, v := range vecs {
		if d := cmp.Diff(ix.Scan(v, 10, ""), sub.Scan(v, 10, "")); d != "" {
			t.Fatalf("(-index +subset):\n%s", d)
		}
	}
}
