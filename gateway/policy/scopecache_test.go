package policy

import (
	"fmt"
	"testing"
)

// The cache holds at most max entries, and scopes taking turns past the
// bound keep most of theirs: each round misses only what the bound cannot
// hold, plus the few that churn. A value kept again for the same key
// (a Sight of a newer catalog) takes no more room.
func TestScopeCacheBound(t *testing.T) {
	c := &scopeCache[int]{max: 8}
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprint("scope", i)
	}
	misses := 0
	for round := range 5 {
		for _, k := range keys {
			if _, ok := c.load(k); !ok {
				misses++
				c.add(k, round)
			}
			if c.len() > c.max {
				t.Fatalf("%d entries, over the bound of %d", c.len(), c.max)
			}
		}
	}
	if misses > 10+4*4 {
		t.Errorf("%d misses in 5 rounds of 10 scopes with room for 8, want at most 26 (all in the first round, 4 a round after)", misses)
	}
	for _, k := range keys[:3] {
		c.put(k, 99)
	}
	if c.len() > c.max {
		t.Errorf("%d entries after putting kept keys again, over the bound of %d", c.len(), c.max)
	}
}
