package search_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/search"
)

// Two rankers on the same 40 queries: good ranks every query's tool
// first, half ranks it first for every other query (second otherwise).
// Bootstrap gives each its interval and half's paired difference to good,
// the same on every call.
func TestBootstrap(t *testing.T) {
	good, half := fixedSearcher{}, fixedSearcher{}
	var qs []search.BenchQuery
	for i := range 40 {
		q := fmt.Sprintf("q%d", i)
		qs = append(qs, search.BenchQuery{Query: q, Relevant: []string{"s__a"}, Line: i + 1})
		good[q] = []string{"s__a", "s__b"}
		half[q] = []string{"s__a", "s__b"}
		if i%2 == 1 {
			half[q] = []string{"s__b", "s__a"}
		}
	}
	// A no-answer query counts in no ranking metric.
	qs = append(qs, search.BenchQuery{Query: "none", Relevant: []string{}, Line: 41})
	var reps []search.Report
	for _, s := range []fixedSearcher{good, half} {
		rep, err := search.Evaluate(context.Background(), s, qs, search.ModeBM25)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, rep)
	}
	cis, diffs := search.Bootstrap(reps, 0, 1000)
	ci := func(r int, name string) search.Interval {
		for _, c := range cis[r] {
			if c.Name == name {
				return c.CI
			}
		}
		t.Fatalf("no interval of %s in %v", name, cis[r])
		return search.Interval{}
	}
	if got := ci(0, "hit@1"); got != (search.Interval{1, 1}) {
		t.Errorf("good hit@1 interval %v, want [1, 1]", got)
	}
	if got := ci(1, "hit@1"); !(got[0] > 0.25 && got[0] < 0.5 && got[1] > 0.5 && got[1] < 0.75) {
		t.Errorf("half hit@1 interval %v, want about [0.35, 0.65]", got)
	}
	if got := ci(1, "hit@5"); got != (search.Interval{1, 1}) {
		t.Errorf("half hit@5 interval %v, want [1, 1]", got)
	}
	if diffs[0] != nil {
		t.Errorf("the baseline has a difference to itself: %v", diffs[0])
	}
	want := map[string]search.Diff{
		"hit@1": {Mean: -0.5, P: 0}, "hit@5": {Mean: 0, CI95: search.Interval{0, 0}, P: 1},
	}
	for _, d := range diffs[1] {
		w, ok := want[d.Name]
		if !ok {
			continue
		}
		if d.Diff.Mean != w.Mean || d.Diff.P != w.P {
			t.Errorf("%s: difference %+v, want mean %v p %v", d.Name, d.Diff, w.Mean, w.P)
		}
		if d.Name == "hit@1" && !(d.Diff.CI95[0] < -0.25 && d.Diff.CI95[1] < 0) {
			t.Errorf("hit@1: difference interval %v, want below 0", d.Diff.CI95)
		}
	}
	if len(diffs[1]) != 7 {
		t.Errorf("differences of %d metrics, want the 7 ranking metrics: %v", len(diffs[1]), diffs[1])
	}
	again, againDiffs := search.Bootstrap(reps, 0, 1000)
	if d := cmp.Diff(cis, again); d != "" {
		t.Errorf("a second call gave other intervals (-first +second):\n%s", d)
	}
	if d := cmp.Diff(diffs, againDiffs); d != "" {
		t.Errorf("a second call gave other differences (-first +second):\n%s", d)
	}
	b, err := json.Marshal(diffs[1][:1])
	if err != nil || string(b) != `{"hit@1":{"mean":-0.5,"ci95":[`+fmt.Sprint(diffs[1][0].Diff.CI95[0])+`,`+fmt.Sprint(diffs[1][0].Diff.CI95[1])+`],"p":0}}` {
		t.Errorf("JSON %s, %v", b, err)
	}
}
