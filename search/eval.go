package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/perf"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/typo"
)

// This file holds the relevance benchmark: the loader for the bench format
// (../shared/bench/README.md) and the metrics `toolgate eval` and the golden
// test report.

// BenchQuery is one line of a queries.jsonl file.
type BenchQuery struct {
	Query string `json:"query"`
	// Relevant lists the namespaced IDs (server__tool) of the right
	// answers. Empty ("relevant": []) marks a no-answer query: no tool of
	// the catalog fits it, and the right answer is NoMatch.
	Relevant []string `json:"relevant"`
	// RelevantGroups, when present, lists one set per step of a multi-step
	// task; a step is satisfied when any member is retrieved.
	RelevantGroups [][]string `json:"relevant_groups,omitempty"`
	// File and Line are the file's name and the 1-based line number in
	// it (for messages).
	File string `json:"-"`
	Line int    `json:"-"`
}

// LoadQueries reads a queries.jsonl file in the bench format.
func LoadQueries(path string) ([]BenchQuery, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load queries: %w", err)
	}
	defer f.Close()
	qs, err := ReadQueries(f, path)
	if err != nil {
		return nil, catalog.NotLines(path, "queries", err)
	}
	return qs, nil
}

// ReadQueries reads queries in the bench format from r; name prefixes
// messages. Extra keys (subset, namespace, id …) are ignored; a file
// without a query is an error.
func ReadQueries(r io.Reader, name string) ([]BenchQuery, error) {
	var qs []BenchQuery
	err := catalog.EachLine(r, name, func(line int, b []byte) error {
		if err := notUTF8(b, name); err != nil {
			return err
		}
		var q BenchQuery
		if err := catalog.DecodeLine(b, &q); err != nil {
			return relevantShape(b, name, err)
		}
		if strings.TrimSpace(q.Query) == "" {
			return errors.New(`empty "query"`)
		}
		if q.Relevant == nil {
			return errors.New(`missing "relevant": list the server__tool IDs that answer the query, or [] when no tool does`)
		}
		if len(q.Relevant) == 0 && len(q.RelevantGroups) > 0 {
			return errors.New(`"relevant" is [] (no answer) but "relevant_groups" lists tools`)
		}
		for i, g := range q.RelevantGroups {
			if len(g) == 0 {
				return fmt.Errorf("relevant_groups[%d] is empty", i)
			}
		}
		q.File, q.Line = name, line
		qs = append(qs, q)
		return nil
	})
	if err == nil && len(qs) == 0 {
		err = fmt.Errorf(`%s holds no queries: each line is one query, {"query": "...", "relevant": ["server__tool", ...]}`, name)
	}
	return qs, err
}

// notUTF8 says where line b of file name is not UTF-8 (nil when it is):
// JSON's decoder reads such a byte as U+FFFD, so a file saved in
// Windows-1252 or Latin-1 ("café") was evaluated with other queries than
// it holds, silently.
func notUTF8(b []byte, name string) error {
	if utf8.Valid(b) {
		return nil
	}
	i := 0
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return fmt.Errorf("not UTF-8 text at column %d (byte %#x): the query would be read with U+FFFD in its place; convert the file, e.g. iconv -f WINDOWS-1252 -t UTF-8 %s > %s",
		utf8.RuneCount(b[:i])+1, b[i], name, strings.TrimSuffix(name, ".jsonl")+"-utf8.jsonl")
}

// QueryKey is a query's words, spacing aside: two queries of one key are
// one query asked twice.
func QueryKey(query string) string { return strings.Join(strings.Fields(query), " ") }

// Repeats lists the queries of qs asked earlier in qs (the same QueryKey),
// each as `FILE:LINE repeats line LINE ("query")` (FILE:LINE when the
// first asking is in another file), and how many there are: each asking counts in the
// figures, which a file joined from two sources seldom means.
func Repeats(qs []BenchQuery) (n int, first []string) {
	seen := make(map[string]int, len(qs))
	for i, q := range qs {
		k := QueryKey(q.Query)
		j, ok := seen[k]
		if !ok {
			seen[k] = i
			continue
		}
		if n++; len(first) < 5 {
			at := fmt.Sprintf("%s:%d", qs[j].File, qs[j].Line)
			if qs[j].File == q.File {
				at = fmt.Sprintf("line %d", qs[j].Line)
			}
			first = append(first, fmt.Sprintf("%s:%d repeats %s (%q)", q.File, q.Line, at, k))
		}
	}
	return n, first
}

// relevantShape is err, the failure to decode a queries line b, said with
// its fix when "relevant" is a string (one ID, not a list of one), holds
// graded judgments ({"id": 2} or [{"id": …, "grade": 2}]: eval's
// relevance is binary, and the fix keeps the IDs graded above 0) or
// objects that name their tool alone ([{"id": …}]: the fix takes the IDs).
func relevantShape(b []byte, name string, err error) error {
	var line struct {
		Relevant json.RawMessage `json:"relevant"`
	}
	if json.Unmarshal(b, &line) != nil {
		return err
	}
	const binary = "eval's relevance is binary (a tool answers the query or not): of graded judgments keep the IDs graded above 0"
	r := bytes.TrimSpace(line.Relevant)
	var one string
	var graded map[string]json.RawMessage
	var objects []map[string]json.RawMessage
	switch {
	case json.Unmarshal(r, &one) == nil:
		list, _ := json.Marshal([]string{one})
		return fmt.Errorf(`"relevant" must be a list of server__tool IDs, not a JSON string: write %s`, list)
	case json.Unmarshal(r, &graded) == nil:
		return fmt.Errorf(`"relevant" must be a list of server__tool IDs, not a JSON object: %s, e.g. %s > queries-binary.jsonl`,
			binary, shellword.Join("jq", "-c", ".relevant |= (to_entries | map(select(.value > 0) | .key))", name))
	case json.Unmarshal(r, &objects) == nil && len(objects) > 0:
		// The ID is the first key of a string, the grade the first of a
		// number, in the first object (keys sorted: the file's order is
		// lost).
		var id, grade string
		for _, k := range slices.Sorted(maps.Keys(objects[0])) {
			v := bytes.TrimSpace(objects[0][k])
			switch {
			case id == "" && len(v) > 0 && v[0] == '"':
				id = k
			case grade == "" && len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9'):
				grade = k
			}
		}
		const objs = `"relevant" must be a list of server__tool IDs, not of JSON objects: `
		switch {
		case id != "" && grade != "":
			return errors.New(objs + binary + ", e.g. " + shellword.Join("jq", "-c", fmt.Sprintf(".relevant |= map(select(.%s > 0) | .%s)", grade, id), name) + " > queries-binary.jsonl")
		case id != "":
			// Objects that only name their tool ([{"id": "a__b"}]) are
			// no graded judgments: the fix takes the IDs out.
			return errors.New(objs + "e.g. " + shellword.Join("jq", "-c", fmt.Sprintf(".relevant |= map(.%s)", id), name) + " > queries-ids.jsonl")
		}
		return errors.New(objs + binary)
	}
	return err
}

// CheckQueries reports relevant IDs that name no tool: a typo there would
// silently lower every metric. Each is said as "FILE:LINE:", with the ID
// meant when one is likely (Meant).
func CheckQueries(tools []catalog.Tool, qs []BenchQuery) error {
	ids := make(map[string]bool, len(tools))
	for _, t := range tools {
		ids[t.ID()] = true
	}
	meant := func(id string) string {
		if m := Meant(id, tools); m != "" {
			return ": " + m
		}
		return ""
	}
	// Ten are said; then how many more, and, when no ID at all is a tool
	// of the catalog, that the queries are another catalog's.
	var errs []error
	missing, lines, known := 0, 0, 0
	for _, q := range qs {
		bad := false
		check := func(what, id string) {
			if ids[id] {
				known++
				return
			}
			missing++
			bad = true
			if len(errs) < 10 {
				errs = append(errs, fmt.Errorf("%s:%d: %s %q is not a tool of the catalog%s", q.File, q.Line, what, id, meant(id)))
			}
		}
		for _, id := range q.Relevant {
			check("relevant", id)
		}
		for _, g := range q.RelevantGroups {
			for _, id := range g {
				check("relevant_groups member", id)
			}
		}
		if bad {
			lines++
		}
	}
	if missing > len(errs) {
		errs = append(errs, fmt.Errorf("(%d more IDs not in the catalog; %s with one in all)", missing-len(errs), plural.Of(lines, "line")))
	}
	if missing > 0 && known == 0 {
		errs = append([]error{fmt.Errorf("%s: none of its %d relevant IDs is a tool of the catalog (%s): are the queries another catalog's?", qs[0].File, missing, plural.Of(len(tools), "tool"))}, errs...)
	}
	return errors.Join(errs...)
}

// Meant says which ID of tools an id that is none of theirs likely meant:
// that of the tools whose bare name it is (IDs are server__tool), or the
// one a typo away; "" when none is likely.
func Meant(id string, tools []catalog.Tool) string {
	var named []string
	all := make([]string, 0, len(tools))
	for _, t := range tools {
		if t.Name == id {
			named = append(named, t.ID())
		}
		all = append(all, t.ID())
	}
	if len(named) > 0 {
		return "give the tool's server__tool ID, " + quoted(named)
	}
	if m, ok := typo.Suggest(id, all); ok {
		return fmt.Sprintf("did you mean %q?", m)
	}
	return ""
}

// quoted is ids quoted, joined with "or".
func quoted(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return strings.Join(q, " or ")
}

// NoAnswer reports whether q has no relevant tool: its right answer is
// NoMatch.
func (q BenchQuery) NoAnswer() bool { return len(q.Relevant) == 0 }

// QueryMetrics are one query's scores; Metrics averages them.
type QueryMetrics struct {
	// NoAnswer marks a no-answer query: only Abstained counts for it.
	NoAnswer bool
	// Abstained says the answer was NoMatch.
	Abstained         bool
	Hit1, Hit5, Hit10 float64
	Recall5, Recall10 float64
	MRR10, NDCG10     float64
	GroupRecall5      float64
	GroupRecall10     float64
	HasGroups         bool
	FirstRelevantRank int // 1-based; 0 when no relevant tool is in the ranking
}

// Score computes the metrics of one ranking (best first) against q, with
// binary relevance.
func Score(ranking []string, q BenchQuery) QueryMetrics {
	rel := make(map[string]bool, len(q.Relevant))
	for _, id := range q.Relevant {
		rel[id] = true
	}
	var m QueryMetrics
	found5, found10 := 0, 0
	dcg := 0.0
	for i, id := range ranking {
		if !rel[id] {
			continue
		}
		rank := i + 1
		if m.FirstRelevantRank == 0 {
			m.FirstRelevantRank = rank
		}
		if rank <= 5 {
			found5++
		}
		if rank <= 10 {
			found10++
			dcg += 1 / math.Log2(float64(rank)+1)
		}
	}
	if r := m.FirstRelevantRank; r > 0 {
		m.Hit1 = b2f(r <= 1)
		m.Hit5 = b2f(r <= 5)
		m.Hit10 = b2f(r <= 10)
		if r <= 10 {
			m.MRR10 = 1 / float64(r)
		}
	}
	m.Recall5 = float64(found5) / float64(len(rel))
	m.Recall10 = float64(found10) / float64(len(rel))
	idcg := 0.0
	for i := range min(len(rel), 10) {
		idcg += 1 / math.Log2(float64(i+2))
	}
	m.NDCG10 = dcg / idcg
	if len(q.RelevantGroups) > 0 {
		m.HasGroups = true
		pos := make(map[string]int, len(ranking))
		for i, id := range ranking {
			if _, ok := pos[id]; !ok {
				pos[id] = i + 1
			}
		}
		for _, g := range q.RelevantGroups {
			best := 0
			for _, id := range g {
				if p, ok := pos[id]; ok && (best == 0 || p < best) {
					best = p
				}
			}
			if best > 0 && best <= 5 {
				m.GroupRecall5++
			}
			if best > 0 && best <= 10 {
				m.GroupRecall10++
			}
		}
		m.GroupRecall5 /= float64(len(q.RelevantGroups))
		m.GroupRecall10 /= float64(len(q.RelevantGroups))
	}
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Metrics are averages over a query set, as fractions 0–1. The ranking
// metrics average over the answerable queries (Queries of them), the group
// recalls over those that have relevant_groups (GroupQueries).
// AbstainRate is the share of the no-answer queries (NoAnswerQueries)
// answered with NoMatch, FalseAbstainRate the share of the answerable ones,
// AbstainLostHit1 the share of the answerable ones answered with NoMatch
// although their first tool was right (a part of FalseAbstainRate: the
// rest had a wrong tool first). Their JSON (`toolgate eval --json`, the ranking
// golden file) is an object of the names Named gives.
type Metrics struct {
	Hit1          float64
	Hit5          float64
	Hit10         float64
	Recall5       float64
	Recall10      float64
	MRR10         float64
	NDCG10        float64
	GroupRecall5  float64
	GroupRecall10 float64
	// The abstain rates are named as issue 12 names them (abstain_rate,
	// false_abstain_rate), a contract older than the camelCase rule.
	AbstainRate      float64
	FalseAbstainRate float64
	AbstainLostHit1  float64
	Queries          int
	GroupQueries     int
	NoAnswerQueries  int
}

// Metric is one metric value under its name.
type Metric struct {
	Name  string
	Value float64
}

// metricSlot is one metric's name and field (see slots); abstain marks
// the abstain rates.
type metricSlot struct {
	name    string
	v       *float64
	kind    slotKind
	abstain bool
}

// slotKind says which queries a metric needs to exist.
type slotKind int

const (
	ranking  slotKind = iota // answerable queries
	group                    // queries with relevant_groups
	noAnswer                 // no-answer queries
)

// slots are the metrics' names, in report order, and their fields: the one
// list of metric names. A name is the metric's word in camelCase, "@" and
// its cut-off ("hit@1", "ndcg@10", "groupRecall@10").
func (m *Metrics) slots() []metricSlot {
	return []metricSlot{
		{"hit@1", &m.Hit1, ranking, false}, {"hit@5", &m.Hit5, ranking, false}, {"hit@10", &m.Hit10, ranking, false},
		{"recall@5", &m.Recall5, ranking, false}, {"recall@10", &m.Recall10, ranking, false},
		{"mrr@10", &m.MRR10, ranking, false}, {"ndcg@10", &m.NDCG10, ranking, false},
		{"groupRecall@5", &m.GroupRecall5, group, false}, {"groupRecall@10", &m.GroupRecall10, group, false},
		{"false_abstain_rate", &m.FalseAbstainRate, ranking, true}, {"abstainLostHit@1", &m.AbstainLostHit1, ranking, true},
		{"abstain_rate", &m.AbstainRate, noAnswer, true},
	}
}

// Named lists the metrics under their names, in report order, each when
// its kind of query was measured (answerable ones for the ranking metrics
// and the false abstain rates, relevant groups for the group recalls,
// no-answer queries for the abstain rate) or it is not zero (metrics read
// back from JSON).
func (m Metrics) Named() []Metric { return m.named(func(metricSlot) bool { return true }) }

// Abstains is Named's abstain rates alone: false_abstain_rate,
// abstainLostHit@1 and, with no-answer queries, abstain_rate.
func (m Metrics) Abstains() []Metric { return m.named(func(s metricSlot) bool { return s.abstain }) }

// named is Named, of the slots keep lets through.
func (m Metrics) named(keep func(metricSlot) bool) []Metric {
	var out []Metric
	for _, s := range m.slots() {
		n := m.Queries
		switch s.kind {
		case group:
			n = m.GroupQueries
		case noAnswer:
			n = m.NoAnswerQueries
		}
		if !keep(s) || n == 0 && *s.v == 0 {
			continue
		}
		out = append(out, Metric{s.name, *s.v})
	}
	return out
}

// MarshalJSON writes Named as one object, in report order.
func (m Metrics) MarshalJSON() ([]byte, error) { return MetricList(m.Named()).MarshalJSON() }

// MetricList is metrics written as one JSON object of their names, in
// order.
type MetricList []Metric

func (l MetricList) MarshalJSON() ([]byte, error) {
	return orderedJSON(len(l), func(i int) (string, any) { return l[i].Name, l[i].Value })
}

// orderedJSON writes n named values, at(i) each, as one JSON object in
// that order (a map's would be sorted by name).
func orderedJSON(n int, at func(i int) (string, any)) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range n {
		name, val := at(i)
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		v, err := json.Marshal(val)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes; an unknown name is an error
// that lists the known ones.
func (m *Metrics) UnmarshalJSON(data []byte) error {
	var in map[string]float64
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	slots := m.slots()
	for k, v := range in {
		i := slices.IndexFunc(slots, func(s metricSlot) bool { return s.name == k })
		if i < 0 {
			var names []string
			for _, s := range slots {
				names = append(names, s.name)
			}
			return fmt.Errorf("unknown metric %q (want one of %s)", k, strings.Join(names, ", "))
		}
		*slots[i].v = v
	}
	return nil
}

// Average averages per-query metrics.
func Average(ms []QueryMetrics) Metrics {
	var out Metrics
	for _, m := range ms {
		if m.NoAnswer {
			out.NoAnswerQueries++
			out.AbstainRate += b2f(m.Abstained)
			continue
		}
		out.Queries++
		out.FalseAbstainRate += b2f(m.Abstained)
		out.AbstainLostHit1 += b2f(m.Abstained && m.Hit1 == 1)
		out.Hit1 += m.Hit1
		out.Hit5 += m.Hit5
		out.Hit10 += m.Hit10
		out.Recall5 += m.Recall5
		out.Recall10 += m.Recall10
		out.MRR10 += m.MRR10
		out.NDCG10 += m.NDCG10
		if m.HasGroups {
			out.GroupRecall5 += m.GroupRecall5
			out.GroupRecall10 += m.GroupRecall10
			out.GroupQueries++
		}
	}
	if n := float64(out.NoAnswerQueries); n > 0 {
		out.AbstainRate /= n
	}
	if n := float64(out.Queries); n > 0 {
		out.FalseAbstainRate /= n
		out.AbstainLostHit1 /= n
		out.Hit1 /= n
		out.Hit5 /= n
		out.Hit10 /= n
		out.Recall5 /= n
		out.Recall10 /= n
		out.MRR10 /= n
		out.NDCG10 /= n
	}
	if n := float64(out.GroupQueries); n > 0 {
		out.GroupRecall5 /= n
		out.GroupRecall10 /= n
	}
	return out
}

// Ranker is what Evaluate needs: a ranking of catalog tools for a query.
// *Engine implements it.
type Ranker interface {
	Search(ctx context.Context, q Query) (Result, error)
}

var _ Ranker = (*Engine)(nil)

// EvalDepth is how many hits Evaluate asks for per query (the deepest
// cut-off of the metrics).
const EvalDepth = 10

// NoMatchFirst stands in Report.Firsts for a no-answer query answered
// with NoMatch, as it should be.
const NoMatchFirst = "(noMatch)"

// Miss is a query whose relevant tools are all outside the top 5, or a
// no-answer query that was not answered with NoMatch.
type Miss struct {
	Query BenchQuery
	// Rank is the 1-based rank of the first relevant tool within the top
	// EvalDepth, 0 when none is there.
	Rank int
	// Top are the IDs that came first.
	Top []string
}

// Report is the outcome of evaluating one mode on one query set.
type Report struct {
	Mode       Mode
	Metrics    Metrics
	LatencyP50 time.Duration
	LatencyP95 time.Duration
	Misses     []Miss
	// Firsts holds each query's first tool (its ID), in query order; ""
	// when the ranking was empty, NoMatchFirst for a no-answer query
	// answered with NoMatch.
	Firsts []string
	// Confidences holds each query's best confidence (the highest of its
	// hits'; 0 for an empty ranking), in query order: what At reads.
	Confidences []float64

	qs     []BenchQuery
	scores []QueryMetrics // each query's, Abstained not set
	judged []QueryMetrics // each query's, as judge judged it
	ranked [][]string     // each query's ranking (IDs, at most EvalDepth)
}

// judge sets Metrics, Misses and Firsts from the rankings, with the
// queries abstained says were answered with NoMatch.
func (r *Report) judge(abstained func(i int) bool) {
	per := make([]QueryMetrics, len(r.qs))
	r.Misses, r.Firsts = nil, make([]string, len(r.qs))
	for i, q := range r.qs {
		ids := r.ranked[i]
		m := r.scores[i]
		m.Abstained = abstained(i)
		per[i] = m
		if len(ids) > 0 {
			r.Firsts[i] = ids[0]
		}
		top := ids[:min(5, len(ids))]
		switch {
		case q.NoAnswer() && m.Abstained:
			r.Firsts[i] = NoMatchFirst
		case q.NoAnswer():
			r.Misses = append(r.Misses, Miss{Query: q, Top: top})
		case m.Hit5 == 0:
			r.Misses = append(r.Misses, Miss{Query: q, Rank: m.FirstRelevantRank, Top: top})
		}
	}
	r.Metrics = Average(per)
	r.judged = per
}

// Scored is one query and its metrics.
type Scored struct {
	Query   BenchQuery
	Metrics QueryMetrics
}

// PerQuery is each query and its metrics, in query order, with the
// report's abstentions: what Metrics averages.
func (r Report) PerQuery() []Scored {
	out := make([]Scored, len(r.judged))
	for i, m := range r.judged {
		out[i] = Scored{r.qs[i], m}
	}
	return out
}

// At is the report that searches with the threshold minConfidence would
// have given: the same rankings, answered with NoMatch where the best
// confidence is below it (never, when it is negative; 0 is the threshold
// 0 here, not Options' default). It is exact for any threshold up to the
// one the searches ran with: the rankings do not depend on it, and a
// query's parts, which can only raise its confidence, were embedded
// wherever it fell below that one (parts.go). toolgate eval --thresholds
// reads every threshold from one run this way.
func (r Report) At(minConfidence float64) Report {
	r.judge(func(i int) bool { return minConfidence >= 0 && r.Confidences[i] < minConfidence })
	return r
}

// Evaluate runs every query through s in mode and scores the rankings.
// It fails if the searcher answers in another mode (degraded), so a figure
// is never reported under the wrong name.
func Evaluate(ctx context.Context, s Ranker, qs []BenchQuery, mode Mode) (Report, error) {
	lat := make([]time.Duration, 0, len(qs))
	rep := Report{Mode: mode, qs: qs}
	noMatch := make([]bool, 0, len(qs))
	for _, q := range qs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		start := time.Now()
		res, err := s.Search(ctx, Query{Text: q.Query, Limit: EvalDepth, Mode: mode})
		lat = append(lat, time.Since(start))
		if err != nil {
			return rep, fmt.Errorf("query on line %d: %w", q.Line, err)
		}
		if mode != "" && res.Mode != mode {
			return rep, fmt.Errorf("mode %s ran as %s: vectors are unavailable", mode, res.Mode)
		}
		rep.Mode = res.Mode
		ids := make([]string, len(res.Hits))
		best := 0.0
		for i, h := range res.Hits {
			ids[i] = h.Tool.ID()
			best = max(best, h.Confidence)
		}
		score := QueryMetrics{NoAnswer: true}
		if !q.NoAnswer() {
			score = Score(ids, q)
		}
		rep.ranked = append(rep.ranked, ids)
		rep.scores = append(rep.scores, score)
		rep.Confidences = append(rep.Confidences, best)
		noMatch = append(noMatch, res.NoMatch)
	}
	rep.judge(func(i int) bool { return noMatch[i] })
	rep.LatencyP50 = perf.Percentile(lat, 50)
	rep.LatencyP95 = perf.Percentile(lat, 95)
	return rep, nil
}

// WarmQueries embeds the query texts and their parts (QueryParts) as
// Search will see them (trimmed, as queries: index.EmbedQueries), in
// batches, so that with a caching embedder the timed searches of Evaluate
// find their vectors in the cache: batches embed several times faster than
// one text at a time. progress, when not nil, is called after each batch
// with the queries whose texts are all embedded and the number of queries
// (eval shows it on stderr: 20,000 queries take minutes to embed).
func WarmQueries(ctx context.Context, emb index.Embedder, qs []BenchQuery, progress func(done, total int)) error {
	texts := make([]string, 0, len(qs))
	// ends[i] is the number of texts up to and including query i's.
	ends := make([]int, len(qs))
	for i, q := range qs {
		text := strings.TrimSpace(q.Query)
		texts = append(texts, text)
		texts = append(texts, QueryParts(text)...)
		ends[i] = len(texts)
	}
	var done func(int)
	if progress != nil {
		progress(0, len(qs))
		done = func(n int) {
			// The queries all of whose texts are among the first n.
			q, _ := slices.BinarySearch(ends, n+1)
			progress(q, len(qs))
		}
	}
	if _, err := embedBatched(ctx, emb, index.QueryPrefix(emb), texts, done); err != nil {
		return fmt.Errorf("embed queries: %w", err)
	}
	return nil
}

// ExactNameQueries are the queries of the exact-name check: each tool's
// bare name (relevant: every tool of that name, on any server) and its
// server__tool ID (relevant: that tool). Exact names always win, so every
// one of them scores Hit@1 = 1 (TestExactNames).
func ExactNameQueries(tools []catalog.Tool) []BenchQuery {
	byName := map[string][]string{}
	var order []string
	for _, t := range tools {
		if _, ok := byName[t.Name]; !ok {
			order = append(order, t.Name)
		}
		byName[t.Name] = append(byName[t.Name], t.ID())
	}
	qs := make([]BenchQuery, 0, len(order)+len(tools))
	for _, name := range order {
		qs = append(qs, BenchQuery{Query: name, Relevant: byName[name], Line: len(qs) + 1})
	}
	for _, t := range tools {
		qs = append(qs, BenchQuery{Query: t.ID(), Relevant: []string{t.ID()}, Line: len(qs) + 1})
	}
	return qs
}
