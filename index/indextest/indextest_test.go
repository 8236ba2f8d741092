package indextest

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCatalog(t *testing.T) {
	for _, n := range []int{1, 100, 1000, 10000} {
		tools := Catalog(n, Seed)
		if len(tools) != n {
			t.Fatalf("Catalog(%d) has %d tools", n, len(tools))
		}
		seen := map[string]bool{}
		for _, tl := range tools {
			if seen[tl.ID()] {
				t.Fatalf("Catalog(%d): duplicate %s", n, tl.ID())
			}
			seen[tl.ID()] = true
			var s struct {
				Properties map[string]struct{ Type, Description string }
			}
			if err := json.Unmarshal(tl.InputSchema, &s); err != nil {
				t.Fatalf("%s: schema: %v", tl.ID(), err)
			}
			if len(s.Properties) < 1 || len(s.Properties) > 6 {
				t.Fatalf("%s: %d parameters, want 1-6", tl.ID(), len(s.Properties))
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	a, b := Catalog(500, Seed), Catalog(500, Seed)
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("same seed, different catalogs (-a +b):\n%s", d)
	}
	qa, qb := Queries(a, 50, Seed), Queries(b, 50, Seed)
	if d := cmp.Diff(qa, qb); d != "" {
		t.Errorf("same seed, different queries (-a +b):\n%s", d)
	}
}

func TestPrefix(t *testing.T) {
	small, big := Catalog(1000, Seed), Catalog(10000, Seed)
	if d := cmp.Diff(small, big[:1000]); d != "" {
		t.Errorf("Catalog(1000) is not a prefix of Catalog(10000) (-small +big):\n%s", d)
	}
}
