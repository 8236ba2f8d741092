package index

import (
	"context"
	"os"
	"testing"
)

// TestSweep compares field boosts and query shapes on the bench splits.
// TOOLGATE_SWEEP=1 go test ./index -run TestSweep -v
func TestSweep(t *testing.T) {
	if os.Getenv("TOOLGATE_SWEEP") == "" {
		t.Skip("set TOOLGATE_SWEEP=1 to run the ranking sweep")
	}
	boostSets := []map[string]float64{
		{fieldName: 1, fieldServer: 0.5, fieldDesc: 1, fieldParams: 0.3},
		{fieldName: 0.6, fieldServer: 0.5, fieldDesc: 1, fieldParams: 0.3},
		{fieldName: 1, fieldServer: 0, fieldDesc: 1, fieldParams: 0.3},
		{fieldName: 1, fieldServer: 0.5, fieldDesc: 1, fieldParams: 0},
		{fieldName: 1, fieldServer: 0.5, fieldDesc: 1, fieldParams: 0.6},
		{fieldName: 1.5, fieldServer: 0.5, fieldDesc: 1, fieldParams: 0.3},
	}
	oldB, oldS := fieldBoosts, queryShape
	defer func() { fieldBoosts, queryShape = oldB, oldS }()
	for shape := 0; shape < 2; shape++ {
		for bi, bs := range boostSets {
			fieldBoosts, queryShape = bs, shape
			for _, name := range []string{"azure-mcp", "metatool"} {
				tools, qs := loadBench(t, name)
				ix, err := Build(context.Background(), tools, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("shape%d boosts%d %-9s %v", shape, bi, name, evalKeyword(t, ix, qs))
				ix.Close()
			}
		}
	}
}
