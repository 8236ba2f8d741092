package index

import (
	"context"
	"os"
	"testing"
)

// TestSweep compares analyzer chains and field boosts on the bench splits.
// TOOLGATE_SWEEP=1 go test ./index -run TestSweep -v
func TestSweep(t *testing.T) {
	if os.Getenv("TOOLGATE_SWEEP") == "" {
		t.Skip("set TOOLGATE_SWEEP=1 to run the ranking sweep")
	}
	filterSets := map[string][]string{
		"stop+porter":   {identSplitName, "to_lower", "stop_en", "stemmer_porter"},
		"stop+plural":   {identSplitName, "to_lower", "stop_en", "stemmer_en_plural"},
		"stop+snowball": {identSplitName, "to_lower", "stop_en", "stemmer_en_snowball"},
	}
	boostSets := []map[string]float64{
		{fieldName: 0.6, fieldServer: 0.5, fieldDesc: 1, fieldParams: 0.3},
		{fieldName: 0.8, fieldServer: 0.5, fieldDesc: 1, fieldParams: 0.3},
	}
	oldF, oldB, oldK := analyzerFilters, fieldBoosts, keepWhole
	defer func() { analyzerFilters, fieldBoosts, keepWhole = oldF, oldB, oldK }()
	for fname, fs := range filterSets {
		for _, kw := range []bool{true, false} {
			for bi, bs := range boostSets {
				analyzerFilters, fieldBoosts, keepWhole = fs, bs, kw
				for _, name := range []string{"azure-mcp", "metatool"} {
					tools, qs := loadBench(t, name)
					ix, err := Build(context.Background(), tools, nil, nil)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("%-13s whole=%-5v boosts%d %-9s %v", fname, kw, bi, name, evalKeyword(t, ix, qs))
					ix.Close()
				}
			}
		}
	}
}
