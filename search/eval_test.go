package search_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// ranking a, b, c, … l (12 tools).
var abc = strings.Split("a b c d e f g h i j k l", " ")

func TestScore(t *testing.T) {
	ln := math.Log2
	tests := []struct {
		name string
		q    search.BenchQuery
		want search.QueryMetrics
	}{
		{
			name: "one relevant at rank 3",
			q:    search.BenchQuery{Relevant: []string{"c"}},
			want: search.QueryMetrics{Hit5: 1, Hit10: 1, Recall5: 1, Recall10: 1, MRR10: 1.0 / 3, NDCG10: 1 / ln(4), FirstRelevantRank: 3},
		},
		{
			name: "first of two, other never retrieved",
			q:    search.BenchQuery{Relevant: []string{"a", "x"}},
			want: search.QueryMetrics{Hit1: 1, Hit5: 1, Hit10: 1, Recall5: 0.5, Recall10: 0.5, MRR10: 1, NDCG10: 1 / (1 + 1/ln(3)), FirstRelevantRank: 1},
		},
		{
			name: "ranks 2 and 7",
			q:    search.BenchQuery{Relevant: []string{"g", "b"}},
			want: search.QueryMetrics{Hit5: 1, Hit10: 1, Recall5: 0.5, Recall10: 1, MRR10: 0.5, NDCG10: (1/ln(3) + 1/ln(8)) / (1 + 1/ln(3)), FirstRelevantRank: 2},
		},
		{
			name: "rank 11 is past every cut-off",
			q:    search.BenchQuery{Relevant: []string{"k"}},
			want: search.QueryMetrics{FirstRelevantRank: 11},
		},
		{
			name: "groups",
			q:    search.BenchQuery{Relevant: []string{"a", "g", "y"}, RelevantGroups: [][]string{{"a"}, {"z", "g"}, {"y"}}},
			want: search.QueryMetrics{
				Hit1: 1, Hit5: 1, Hit10: 1, Recall5: 1.0 / 3, Recall10: 2.0 / 3, MRR10: 1,
				NDCG10:    (1 + 1/ln(8)) / (1 + 1/ln(3) + 1/ln(4)),
				HasGroups: true, GroupRecall5: 1.0 / 3, GroupRecall10: 2.0 / 3, FirstRelevantRank: 1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := search.Score(abc, tt.q)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("Score (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAverage(t *testing.T) {
	got := search.Average([]search.QueryMetrics{
		{Hit1: 1, Hit5: 1, Hit10: 1, Recall5: 1, Recall10: 1, MRR10: 1, NDCG10: 1},
		{Hit5: 1, Hit10: 1, Recall5: 0.5, Recall10: 1, MRR10: 0.25, NDCG10: 0.5, HasGroups: true, GroupRecall5: 0.5, GroupRecall10: 1},
		{},
		{Hit10: 1, Recall10: 1, MRR10: 1.0 / 8, NDCG10: 0.25},
	})
	want := search.Metrics{
		Hit1: 0.25, Hit5: 0.5, Hit10: 0.75, Recall5: 0.375, Recall10: 0.75, MRR10: (1 + 0.25 + 0.125) / 4, NDCG10: 1.75 / 4,
		GroupRecall5: 0.5, GroupRecall10: 1, Queries: 4, GroupQueries: 1,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("Average (-want +got):\n%s", diff)
	}
}

func TestReadQueriesErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty query", `{"query":" ","relevant":["a__b"]}`, `queries.jsonl:1: empty "query"`},
		{"no relevant", `{"query":"x","relevant":["a__b"]}` + "\n" + `{"query":"y"}`, `queries.jsonl:2: missing "relevant"`},
		{"no answer with groups", `{"query":"x","relevant":[],"relevant_groups":[["a__b"]]}`, `queries.jsonl:1: "relevant" is []`},
		{"empty group", `{"query":"x","relevant":["a__b"],"relevant_groups":[["a__b"],[]]}`, `queries.jsonl:1: relevant_groups[1] is empty`},
		{"not json", `not json`, `queries.jsonl:1: not valid JSON at column 2 (invalid character 'o' in literal null (expecting 'u')): each line holds one JSON object`},
		{"relevant a string", `{"query":"x","relevant":"a__b"}`, `queries.jsonl:1: "relevant" must be a list of server__tool IDs, not a JSON string: write ["a__b"]`},
		{"relevant graded, a map", `{"query":"x","relevant":{"a__b":2,"a__c":0}}`, `queries.jsonl:1: "relevant" must be a list of server__tool IDs, not a JSON object: eval's relevance is binary (a tool answers the query or not): of graded judgments keep the IDs graded above 0, e.g. jq -c '.relevant |= (to_entries | map(select(.value > 0) | .key))' queries.jsonl > queries-binary.jsonl`},
		{"relevant graded, objects", `{"query":"x","relevant":[{"tool":"a__b","grade":2}]}`, `queries.jsonl:1: "relevant" must be a list of server__tool IDs, not of JSON objects: eval's relevance is binary (a tool answers the query or not): of graded judgments keep the IDs graded above 0, e.g. jq -c '.relevant |= map(select(.grade > 0) | .tool)' queries.jsonl > queries-binary.jsonl`},
		{"relevant objects, no grade", `{"query":"x","relevant":[{"id":"a__b"}]}`, `queries.jsonl:1: "relevant" must be a list of server__tool IDs, not of JSON objects: e.g. jq -c '.relevant |= map(.id)' queries.jsonl > queries-ids.jsonl`},
		{"relevant a number", `{"query":"x","relevant":3}`, `queries.jsonl:1: "relevant" must be a list of strings, not a JSON number`},
		{"groups a flat list", `{"query":"x","relevant":["a__b"],"relevant_groups":["a__b"]}`, `queries.jsonl:1: "relevant_groups" must be a list of lists of strings, not a JSON string`},
		{"query a number", `{"query":5,"relevant":[]}`, `queries.jsonl:1: "query" must be a string, not a JSON number`},
		{"an array", `["x"]`, `queries.jsonl:1: the line is a JSON array: each line must be one JSON object`},
		{"no queries", "", `queries.jsonl holds no queries: each line is one query`},
		{"not UTF-8", "{\"query\":\"caf\xe9 near me\",\"relevant\":[]}", `queries.jsonl:1: not UTF-8 text at column 14 (byte 0xe9): the query would be read with U+FFFD in its place; convert the file, e.g. iconv -f WINDOWS-1252 -t UTF-8 queries.jsonl > queries-utf8.jsonl`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := search.ReadQueries(strings.NewReader(tt.in), "queries.jsonl")
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestReadQueriesAndCheck(t *testing.T) {
	in := `{"query": "list registries", "relevant": ["azure__acr_registry_list"], "namespace": "acr"}
{"query": "plan a trip", "relevant": ["m__a", "m__b"], "relevant_groups": [["m__a"], ["m__b", "m__c"]], "subset": "multi"}
{"query": "book a flight", "relevant": []}
`
	qs, err := search.ReadQueries(strings.NewReader(in), "q")
	if err != nil {
		t.Fatal(err)
	}
	want := []search.BenchQuery{
		{Query: "list registries", Relevant: []string{"azure__acr_registry_list"}, File: "q", Line: 1},
		{Query: "plan a trip", Relevant: []string{"m__a", "m__b"}, RelevantGroups: [][]string{{"m__a"}, {"m__b", "m__c"}}, File: "q", Line: 2},
		{Query: "book a flight", Relevant: []string{}, File: "q", Line: 3},
	}
	if diff := cmp.Diff(want, qs); diff != "" {
		t.Errorf("ReadQueries (-want +got):\n%s", diff)
	}
	if qs[0].NoAnswer() || !qs[2].NoAnswer() {
		t.Errorf("NoAnswer: %v %v, want false true", qs[0].NoAnswer(), qs[2].NoAnswer())
	}
	tools := []catalog.Tool{{Server: "azure", Name: "acr_registry_list"}, {Server: "m", Name: "a"}, {Server: "m", Name: "b"}}
	err = search.CheckQueries(tools, qs)
	if err == nil || !strings.HasPrefix(err.Error(), `q:2: relevant_groups member "m__c" is not a tool of the catalog`) {
		t.Errorf("CheckQueries = %v, want m__c reported", err)
	}
	if err := search.CheckQueries(append(tools, catalog.Tool{Server: "m", Name: "c"}), qs); err != nil {
		t.Errorf("CheckQueries = %v, want nil", err)
	}
}

// An unknown relevant ID is said with the ID meant when one is likely:
// that of the tool whose bare name was given, or the one a typo away.
func TestCheckQueriesMeant(t *testing.T) {
	in := `{"query": "a", "relevant": ["read_file"]}
{"query": "b", "relevant": ["fs__raed_file"]}
{"query": "c", "relevant": ["list"]}
{"query": "d", "relevant": ["fs__read_file"], "relevant_groups": [["write"]]}
`
	qs, err := search.ReadQueries(strings.NewReader(in), "queries.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tools := []catalog.Tool{{Server: "fs", Name: "read_file"}, {Server: "s3", Name: "read_file"}, {Server: "fs", Name: "write"}, {Server: "fs", Name: "list_directory"}}
	want := `queries.jsonl:1: relevant "read_file" is not a tool of the catalog: give the tool's server__tool ID, "fs__read_file" or "s3__read_file"
queries.jsonl:2: relevant "fs__raed_file" is not a tool of the catalog: did you mean "fs__read_file"?
queries.jsonl:3: relevant "list" is not a tool of the catalog
queries.jsonl:4: relevant_groups member "write" is not a tool of the catalog: give the tool's server__tool ID, "fs__write"`
	if err := search.CheckQueries(tools, qs); err == nil || err.Error() != want {
		t.Errorf("CheckQueries =\n%v\nwant\n%s", err, want)
	}
}

// Queries of another catalog: every relevant ID is unknown. The error
// says so first, ten IDs, then how many more; it listed ten and "(more not
// shown)".
func TestCheckQueriesOtherCatalog(t *testing.T) {
	var in strings.Builder
	for i := range 12 {
		fmt.Fprintf(&in, `{"query": "q%d", "relevant": ["metatool__T%d"]}`+"\n", i, i)
	}
	qs, err := search.ReadQueries(strings.NewReader(in.String()), "queries.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tools := []catalog.Tool{{Server: "azure", Name: "acr_registry_list"}, {Server: "azure", Name: "storage_list"}}
	err = search.CheckQueries(tools, qs)
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != 12 ||
		lines[0] != `queries.jsonl: none of its 12 relevant IDs is a tool of the catalog (2 tools): are the queries another catalog's?` ||
		lines[1] != `queries.jsonl:1: relevant "metatool__T0" is not a tool of the catalog` ||
		lines[11] != `(2 more IDs not in the catalog; 12 lines with one in all)` {
		t.Errorf("CheckQueries =\n%v", err)
	}
}

type fixedSearcher map[string][]string

func (f fixedSearcher) Search(_ context.Context, q search.Query) (search.Result, error) {
	var hits []search.Hit
	for _, id := range f[q.Text] {
		s, n, _ := catalog.SplitID(id)
		hits = append(hits, search.Hit{Tool: catalog.Tool{Server: s, Name: n}})
	}
	return search.Result{Hits: hits, Mode: search.ModeBM25}, nil
}

func TestEvaluate(t *testing.T) {
	s := fixedSearcher{
		"one": {"s__a", "s__b"},
		"two": {"s__b", "s__a", "s__c", "s__d", "s__e", "s__f"},
	}
	qs := []search.BenchQuery{
		{Query: "one", Relevant: []string{"s__a"}, Line: 1},
		{Query: "two", Relevant: []string{"s__f"}, Line: 2},
		{Query: "nothing", Relevant: []string{"s__a"}, Line: 3},
	}
	rep, err := search.Evaluate(context.Background(), s, qs, search.ModeBM25)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Metrics.Hit1 != 1.0/3 || rep.Metrics.Hit10 != 2.0/3 || rep.Metrics.MRR10 != (1+1.0/6)/3 {
		t.Errorf("metrics %+v", rep.Metrics)
	}
	wantMiss := []search.Miss{
		{Query: qs[1], Rank: 6, Top: []string{"s__b", "s__a", "s__c", "s__d", "s__e"}},
		{Query: qs[2], Rank: 0, Top: []string{}},
	}
	if diff := cmp.Diff(wantMiss, rep.Misses); diff != "" {
		t.Errorf("Misses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"s__a", "s__b", ""}, rep.Firsts); diff != "" {
		t.Errorf("Firsts (-want +got):\n%s", diff)
	}
	if _, err := search.Evaluate(context.Background(), s, qs, search.ModeHybrid); err == nil {
		t.Error("Evaluate(hybrid) on a searcher answering bm25: no error")
	}
}

// Metrics encode as one object of camelCase metric names in report order;
// the group recalls appear when the queries had groups, even at 0, and the
// encoding reads back.
func TestMetricsJSON(t *testing.T) {
	m := search.Metrics{Hit1: 0.5, Hit5: 0.75, Hit10: 1, Recall5: 0.75, Recall10: 1, MRR10: 0.6, NDCG10: 0.7, Queries: 4}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"hit@1":0.5,"hit@5":0.75,"hit@10":1,"recall@5":0.75,"recall@10":1,"mrr@10":0.6,"ndcg@10":0.7,"false_abstain_rate":0,"abstainLostHit@1":0}`; string(b) != want {
		t.Errorf("no groups:\n got %s\nwant %s", b, want)
	}
	m.GroupQueries = 2
	b, _ = json.Marshal(m)
	if !strings.Contains(string(b), `"ndcg@10":0.7,"groupRecall@5":0,"groupRecall@10":0,`) {
		t.Errorf("with groups: %s, want groupRecall@5 and @10 even at 0", b)
	}
	m.GroupRecall5, m.GroupRecall10 = 0.5, 0.75
	b, _ = json.Marshal(m)
	var back search.Metrics
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.Queries, back.GroupQueries = m.Queries, m.GroupQueries // not encoded
	if back != m {
		t.Errorf("round trip: %+v, want %+v", back, m)
	}
	if err := json.Unmarshal([]byte(`{"group_recall@5": 1}`), &back); err == nil || !strings.Contains(err.Error(), "groupRecall@5") {
		t.Errorf("old snake_case name: err = %v, want one naming the known metrics", err)
	}
}

// No-answer queries count only in the abstain rate; answerable ones answered
// with NoMatch in the false abstain rate, and keep their ranking metrics.
func TestEvaluateNoAnswer(t *testing.T) {
	s := noMatchSearcher{
		"fits":       {ids: []string{"s__a"}},
		"weak":       {ids: []string{"s__a"}, noMatch: true},
		"foreign":    {ids: []string{"s__b"}, noMatch: true},
		"foreign-ok": {ids: []string{"s__b"}},
	}
	qs := []search.BenchQuery{
		{Query: "fits", Relevant: []string{"s__a"}, Line: 1},
		{Query: "weak", Relevant: []string{"s__a"}, Line: 2},
		{Query: "foreign", Relevant: []string{}, Line: 3},
		{Query: "foreign-ok", Relevant: []string{}, Line: 4},
		{Query: "foreign", Relevant: []string{}, Line: 5},
	}
	rep, err := search.Evaluate(context.Background(), s, qs, search.ModeBM25)
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Metrics
	if m.Queries != 2 || m.NoAnswerQueries != 3 || m.Hit1 != 1 || m.FalseAbstainRate != 0.5 || m.AbstainRate != 2.0/3 {
		t.Errorf("metrics %+v", m)
	}
	if len(rep.Misses) != 1 || rep.Misses[0].Query.Line != 4 {
		t.Errorf("misses %+v, want the no-answer query answered (line 4)", rep.Misses)
	}
}

type noMatchSearcher map[string]struct {
	ids     []string
	noMatch bool
}

func (f noMatchSearcher) Search(_ context.Context, q search.Query) (search.Result, error) {
	var hits []search.Hit
	for _, id := range f[q.Text].ids {
		s, n, _ := catalog.SplitID(id)
		hits = append(hits, search.Hit{Tool: catalog.Tool{Server: s, Name: n}})
	}
	return search.Result{Hits: hits, Mode: search.ModeBM25, NoMatch: f[q.Text].noMatch}, nil
}

// Report.At(t) on a run at a higher threshold is the run at t: the same
// metrics, firsts and misses, for every t up to the one searched with,
// including a query whose parts, embedded only below the threshold, raise
// its confidence past some of them (TestPartsConfidence's), and no-answer
// queries.
func TestReportAtIsARunAtThatThreshold(t *testing.T) {
	tools := append(slices.Clone(testCatalog),
		catalog.Tool{Server: "voice", Name: "text_to_speech", Description: "Convert text to speech audio."})
	emb := &hashEmbedder{}
	qs := []search.BenchQuery{
		{Query: "read the contents of a file", Relevant: []string{"fs__read_file"}, Line: 1},
		{Query: "yesterday my neighbour Peter told me a very long story about his summer holiday in the mountains, with his sister, her husband and their three dogs, convert text to speech", Relevant: []string{"voice__text_to_speech"}, Line: 2},
		{Query: "commit my changes, then show the status", Relevant: []string{"git__git_commit"}, Line: 3},
		{Query: "book a flight to Paris", Relevant: []string{}, Line: 4},
		{Query: "zzz qqq", Relevant: []string{}, Line: 5},
		{Query: "search the knowledge graph for people", Relevant: []string{"memory__search_nodes"}, Line: 6},
	}
	run := func(min float64) search.Report {
		t.Helper()
		// Steps off: the parts are then embedded only below the threshold.
		e := search.New(build(t, tools, emb), emb, &search.Options{MinConfidence: min, StepWeight: -1}) // Close closes the index
		defer e.Close()
		rep, err := search.Evaluate(context.Background(), e, qs, search.ModeHybrid)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	const top = 0.9
	all := run(top)
	abstains := map[float64]bool{}
	for _, min := range []float64{-1, 0.01, 0.05, 0.09, 0.2, 0.3, 0.5, 0.7, top} {
		want, got := run(min), all.At(min)
		if diff := cmp.Diff(want.Metrics, got.Metrics); diff != "" {
			t.Errorf("At(%v): metrics (-run at it +At):\n%s", min, diff)
		}
		if diff := cmp.Diff(want.Firsts, got.Firsts); diff != "" {
			t.Errorf("At(%v): firsts (-run at it +At):\n%s", min, diff)
		}
		if diff := cmp.Diff(want.Misses, got.Misses); diff != "" {
			t.Errorf("At(%v): misses (-run at it +At):\n%s", min, diff)
		}
		abstains[got.Metrics.FalseAbstainRate+got.Metrics.AbstainRate] = true
	}
	if len(abstains) < 3 {
		t.Errorf("the thresholds gave only %d different abstain rates: the test needs confidences spread across them (%v)", len(abstains), all.Confidences)
	}
	if diff := cmp.Diff(all.Metrics, all.At(top).Metrics); diff != "" {
		t.Errorf("At(the run's own threshold) differs from the run:\n%s", diff)
	}
}
