package search

import (
	"slices"
	"testing"
)

// Each step the query marks ("then …") keeps its best tool in the answer:
// it replaces the last tool that is neither named by the query nor
// another step's; the first tool stays.
func TestKeepSteps(t *testing.T) {
	all := []ranked{{id: "a", score: 1}, {id: "b", score: 0.9}, {id: "x", score: 0.8, exact: true}, {id: "c", score: 0.7}, {id: "s1", score: 0.5}, {id: "s2", score: 0.4}}
	ids := func(rs []ranked) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.id)
		}
		return out
	}
	for _, c := range []struct {
		limit int
		steps []string
		want  []string
	}{
		{3, nil, []string{"x", "a", "b"}}, // named first (compareRanked)
		{4, []string{"s1", "s2"}, []string{"x", "a", "s1", "s2"}},
		{2, []string{"s1", "s2"}, []string{"x", "a"}}, // the first and the named stay
		{5, []string{"c"}, []string{"x", "a", "b", "c", "s1"}},
	} {
		sorted := slices.Clone(all)
		slices.SortStableFunc(sorted, compareRanked)
		if got := ids(keepSteps(sorted, c.limit, c.steps)); !slices.Equal(got, c.want) {
			t.Errorf("limit %d, steps %v: %v, want %v", c.limit, c.steps, got, c.want)
		}
	}
	for part, marked := range map[string]bool{"then add 2 and 3": true, "After that send it": true, "and then list them": true,
		"finally close it": true, "thenceforth": false, "designed for running": false, "next week's weather": false} {
		if stepMarker.MatchString(part) != marked {
			t.Errorf("%q marked %v, want %v", part, !marked, marked)
		}
	}
}
