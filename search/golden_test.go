package search_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// The ranking golden test (zoekt style) keeps, per dataset and mode,
//
//   - the relevance metrics (averages) in testdata/golden.json: the test
//     fails when one drops by more than the tolerance, and logs a rise;
//   - the first tool of every query in testdata/first/<dataset>.tsv (one
//     line per query): the test fails when more queries than the tolerance
//     allows (a share of the dataset's queries) changed their first tool,
//     and logs each change.
//
// A change of the ranking is recorded with
//
//	go test ./search -run Golden -update -v
//
// (with scripts/native-env.sh sourced, so hybrid/vector/rrf run for real),
// which writes both and prints what it changed: the metric deltas, and
// every query whose first tool changed. Commit the files with the change
// that moved them. Datasets are keyed by name so new fixtures add a row to
// goldenSets and their files without touching the others.

var update = flag.Bool("update", false, "rewrite testdata/golden.json and testdata/first with this run's rankings, printing what changed (add -v to see it)")

const (
	goldenPath = "testdata/golden.json"
	firstsDir  = "testdata/first"
)

// goldenTolerance is the largest drop (absolute, metrics as fractions)
// that still passes, and the largest share of a dataset's queries that may
// change their first tool: ONNX Runtime's float sums may differ in the last
// bits across machines and flip a near-tie.
const goldenTolerance = 0.005

const refresh = "source scripts/native-env.sh && go test ./search -run Golden -update -v"

type goldenFile struct {
	Comment   string                    `json:"comment"`
	Tolerance float64                   `json:"tolerance"`
	Datasets  map[string]*goldenDataset `json:"datasets"`
}

type goldenDataset struct {
	Tools   int                           `json:"tools"`
	Queries int                           `json:"queries"`
	Model   string                        `json:"model,omitempty"`
	Modes   map[search.Mode]goldenMetrics `json:"modes"`
}

// goldenMetrics is one mode's figures in golden.json. Those read from the
// file keep its text and are written back as read when a run does not
// measure them (another dataset's, under -run Golden/bundled): a
// search.Metrics read from JSON has no query counts, so encoding it again
// left out its metrics that are 0.
type goldenMetrics struct {
	search.Metrics
	read json.RawMessage
}

func (g *goldenMetrics) UnmarshalJSON(b []byte) error {
	g.read = slices.Clone(b)
	return json.Unmarshal(b, &g.Metrics)
}

func (g goldenMetrics) MarshalJSON() ([]byte, error) {
	if g.read != nil {
		return g.read, nil
	}
	return json.Marshal(g.Metrics)
}

// goldenSet is one dataset the golden test measures.
type goldenSet struct {
	name string
	load func(t *testing.T) ([]catalog.Tool, []search.BenchQuery)
}

var goldenSets = []goldenSet{
	{"azure-mcp", benchSet("azure-mcp")},
	{"metatool", benchSet("metatool")},
	{"bundled", bundledSet},
	{"azure-mcp+metatool-no-answer", noAnswerSet("azure-mcp", "metatool")},
	{"metatool+azure-mcp-no-answer", noAnswerSet("metatool", "azure-mcp")},
}

// noAnswerSet is one dev split's catalog asked the other split's queries,
// none of which it can answer: the abstain rate of the default
// minConfidence (the false abstain rate is the catalog's own set's).
func noAnswerSet(catalogName, queriesName string) func(t *testing.T) ([]catalog.Tool, []search.BenchQuery) {
	return func(t *testing.T) ([]catalog.Tool, []search.BenchQuery) {
		tools, _ := benchSet(catalogName)(t)
		_, qs := benchSet(queriesName)(t)
		for i := range qs {
			qs[i].Relevant, qs[i].RelevantGroups = []string{}, nil
		}
		return tools, qs
	}
}

// bundledSet is the project's own fixture: the tools the bundled example
// servers (examples/toolgate.json) list right now, from the real npm
// servers, and the queries the team wrote for them
// (testdata/bundled_queries.jsonl). A new version of a server that renames
// or rewords its tools shows up here as a diff.
func bundledSet(t *testing.T) ([]catalog.Tool, []search.BenchQuery) {
	if _, err := os.Stat(filepath.Join("..", "examples", "servers", "node_modules")); err != nil {
		testenv.Require(t, fmt.Errorf("bundled npm servers not installed (scripts/install-servers.sh): %w", err))
	}
	cfg, err := config.Load(filepath.Join("..", "examples", "toolgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	pool := backend.New(cfg.Servers(), nil)
	pool.Start(context.Background())
	defer pool.Close()
	for _, st := range pool.Status() {
		if st.State != backend.StateUp {
			t.Fatalf("bundled server %s is %s: %s", st.Name, st.State, st.Err)
		}
	}
	tools := backend.Catalog(pool.Tools())
	qs, err := search.LoadQueries(filepath.Join("testdata", "bundled_queries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := search.CheckQueries(tools, qs); err != nil {
		t.Fatal(err)
	}
	return tools, qs
}

// benchDir is $TOOLGATE_BENCH_DIR, else the shared/ folder beside the clone.
func benchDir() string {
	if d := os.Getenv("TOOLGATE_BENCH_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "shared", "bench")
}

func benchSet(name string) func(t *testing.T) ([]catalog.Tool, []search.BenchQuery) {
	return func(t *testing.T) ([]catalog.Tool, []search.BenchQuery) {
		dir := filepath.Join(benchDir(), name)
		if _, err := os.Stat(dir); err != nil {
			testenv.Require(t, fmt.Errorf("bench data %s missing (set TOOLGATE_BENCH_DIR): %w", dir, err))
		}
		tools, err := catalog.ReadFile(filepath.Join(dir, "tools.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		qs, err := search.LoadQueries(filepath.Join(dir, "queries.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if err := search.CheckQueries(tools, qs); err != nil {
			t.Fatal(err)
		}
		return tools, qs
	}
}

// installedEmbedder opens the MiniLM embedder installed where the commands
// find it (internal/dirs: environment, then defaults).
func installedEmbedder() (*embed.Embedder, error) {
	return embed.New(&embed.Options{ORTLib: dirs.ORTLib("", ""), ModelDir: dirs.ModelFolder("", "", dirs.Data("", ""))})
}

// cacheBusyWait bounds goldenEmbedder's wait for a cache another process
// holds.
const cacheBusyWait = 10 * time.Minute

// goldenEmbedder opens the real MiniLM embedder behind a Badger cache in
// the user cache folder, so reruns (and CI reruns) embed nothing new.
//
// Another test process (a second checkout's `go test ./search`, a CI run
// beside it) may hold the cache: it is waited for. Embedding without it
// did not finish within the package's 30 min timeout on a loaded 2-core
// machine, where a run with it took 4 min.
func goldenEmbedder(t *testing.T) (index.Embedder, error) {
	e, err := installedEmbedder()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(dirs.Cache(), "test-embeddings")
	var c *embed.Cached
	if !testenv.Poll(cacheBusyWait, func() bool {
		c, err = embed.NewCached(e, dir, nil)
		return !errors.Is(err, embed.ErrCacheBusy)
	}) {
		t.Logf("embedding cache %s still held after %s", dir, cacheBusyWait)
	}
	if err != nil {
		t.Logf("embedding cache %s unavailable, embedding without it: %v", dir, err)
		t.Cleanup(func() { e.Close() })
		return e, nil
	}
	t.Cleanup(func() {
		c.Close()
		e.Close()
	})
	return c, nil
}

func TestGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("ranking golden test embeds thousands of texts on a cold cache; skipped with -short")
	}
	if raceEnabled {
		t.Skip("ranking golden test checks numbers, not concurrency; it runs without -race")
	}
	var want goldenFile
	if b, err := os.ReadFile(goldenPath); err == nil {
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%s: %v", goldenPath, err)
		}
	} else if !*update {
		t.Fatalf("%v (create it with %s)", err, refresh)
	}
	if want.Datasets == nil {
		want.Datasets = map[string]*goldenDataset{}
	}

	emb, embErr := goldenEmbedder(t)
	if embErr != nil && !errors.Is(embErr, embed.ErrMissing) {
		t.Fatalf("load embedder: %v", embErr)
	}
	ctx := context.Background()
	var measured []*measuredSet
	for _, set := range goldenSets {
		t.Run(set.name, func(t *testing.T) {
			tools, qs := set.load(t)
			oldFirsts, listed, firstsErr := readFirsts(firstsPath(set.name), qs)
			ix, err := index.Build(ctx, tools, emb, nil)
			if err != nil {
				t.Fatal(err)
			}
			if emb != nil {
				if err := search.WarmQueries(ctx, emb, qs, nil); err != nil {
					t.Fatal(err)
				}
			}
			eng := search.New(ix, emb, nil)
			defer eng.Close()
			ms := &measuredSet{name: set.name, queries: qs, oldFirsts: oldFirsts, listed: listed, firsts: map[search.Mode][]string{},
				metrics: &goldenDataset{Tools: len(tools), Queries: len(qs), Modes: map[search.Mode]goldenMetrics{}}}
			if emb != nil {
				ms.metrics.Model = emb.ModelID()
			}
			measured = append(measured, ms)
			for _, mode := range search.Modes {
				t.Run(string(mode), func(t *testing.T) {
					if mode != search.ModeBM25 {
						testenv.Require(t, embErr)
					}
					rep, err := search.Evaluate(ctx, eng, qs, mode)
					if err != nil {
						t.Fatal(err)
					}
					m := roundMetrics(rep.Metrics)
					ms.metrics.Modes[mode] = goldenMetrics{Metrics: m}
					ms.firsts[mode] = rep.Firsts
					if *update {
						return
					}
					old := want.Datasets[set.name]
					if old == nil {
						t.Fatalf("dataset %s not in %s: run %s", set.name, goldenPath, refresh)
					}
					wm, ok := old.Modes[mode]
					if !ok {
						t.Fatalf("mode %s of %s not in %s: run %s", mode, set.name, goldenPath, refresh)
					}
					if old.Model != "" && ms.metrics.Model != "" && old.Model != ms.metrics.Model {
						t.Logf("golden figures were made with %s, this run uses %s", old.Model, ms.metrics.Model)
					}
					compareMetrics(t, wm.Metrics, m)
					if firstsErr != nil {
						t.Fatalf("%v: run %s", firstsErr, refresh)
					}
					was, ok := oldFirsts[mode]
					if !ok {
						t.Fatalf("mode %s not in %s: run %s", mode, firstsPath(set.name), refresh)
					}
					compareFirsts(t, qs, was, rep.Firsts)
				})
			}
		})
	}
	logTable(t, measured)
	if *update {
		writeGolden(t, want, measured)
	}
}

// measuredSet is what one run measured on a dataset, beside what its
// golden files held.
type measuredSet struct {
	name      string
	queries   []search.BenchQuery
	metrics   *goldenDataset
	firsts    map[search.Mode][]string // per mode, each query's first tool
	oldFirsts map[search.Mode][]string // nil when the file was missing or for other queries
	listed    int                      // how many of queries oldFirsts holds: the others were added since
}

// writeGolden writes this run's figures and first tools (keeping what it
// could not measure, e.g. the vector modes without an embedder) and logs
// what changed against the files it replaces.
func writeGolden(t *testing.T, want goldenFile, measured []*measuredSet) {
	var sb strings.Builder
	for _, ms := range measured {
		old := want.Datasets[ms.name]
		for _, mode := range search.Modes {
			m, ok := ms.metrics.Modes[mode]
			if !ok {
				// Not measured this run: keep the golden's.
				if old != nil {
					if wm, ok := old.Modes[mode]; ok {
						ms.metrics.Modes[mode] = wm
					}
				}
				if f, ok := ms.oldFirsts[mode]; ok {
					ms.firsts[mode] = f
				}
				continue
			}
			if old != nil {
				if wm, ok := old.Modes[mode]; ok {
					if d := metricDeltas(wm.Metrics, m.Metrics); d != "" {
						fmt.Fprintf(&sb, "%s %s: %s\n", ms.name, mode, d)
					}
				}
			}
			was, ok := ms.oldFirsts[mode]
			if !ok {
				fmt.Fprintf(&sb, "%s %s: first tools recorded for the first time\n", ms.name, mode)
				continue
			}
			now := ms.firsts[mode]
			if ch := firstChanges(ms.queries[:ms.listed], was, now); len(ch) > 0 {
				fmt.Fprintf(&sb, "%s %s: %d of %d queries changed their first tool:\n", ms.name, mode, len(ch), ms.listed)
				for _, c := range ch {
					fmt.Fprintf(&sb, "  %s\n", c)
				}
			}
			if added := ms.queries[ms.listed:]; len(added) > 0 {
				fmt.Fprintf(&sb, "%s %s: %s added, first tools:\n", ms.name, mode, plural.Of(len(added), "query"))
				for i, q := range added {
					id, verdict := now[ms.listed+i], "wrong"
					if slices.Contains(q.Relevant, id) || len(q.Relevant) == 0 && id == "" {
						verdict = "right"
					}
					fmt.Fprintf(&sb, "  line %d %q: %s (%s)\n", q.Line, q.Query, orNone(id), verdict)
				}
			}
		}
		if ms.metrics.Model == "" && old != nil {
			ms.metrics.Model = old.Model
		}
		want.Datasets[ms.name] = ms.metrics
		if err := writeFirsts(ms.name, ms.queries, ms.firsts); err != nil {
			t.Fatal(err)
		}
	}
	want.Comment = "Ranking golden figures (fractions 0-1) per dataset and mode, default search.Options; the first tool of each query is in first/<dataset>.tsv. Refresh: " + refresh
	want.Tolerance = goldenTolerance
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goldenPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if sb.Len() == 0 {
		sb.WriteString("no change\n")
	}
	t.Logf("wrote %s and %s/; what changed:\n%s", goldenPath, firstsDir, sb.String())
}

func roundMetrics(m search.Metrics) search.Metrics {
	r := func(x float64) float64 { return math.Round(x*1e4) / 1e4 }
	return search.Metrics{
		Hit1: r(m.Hit1), Hit5: r(m.Hit5), Hit10: r(m.Hit10),
		Recall5: r(m.Recall5), Recall10: r(m.Recall10),
		MRR10: r(m.MRR10), NDCG10: r(m.NDCG10),
		GroupRecall5: r(m.GroupRecall5), GroupRecall10: r(m.GroupRecall10),
		Queries: m.Queries, GroupQueries: m.GroupQueries, NoAnswerQueries: m.NoAnswerQueries,
		AbstainRate: r(m.AbstainRate), FalseAbstainRate: r(m.FalseAbstainRate), AbstainLostHit1: r(m.AbstainLostHit1),
	}
}

type metricPair struct {
	name      string
	want, got float64
}

// metricPairs pairs each metric of got (search.Metrics.Named: the one list
// of names) with its golden value in want (0 when want lacks it).
func metricPairs(want, got search.Metrics) []metricPair {
	wants := map[string]float64{}
	for _, m := range want.Named() {
		wants[m.Name] = m.Value
	}
	var out []metricPair
	for _, m := range got.Named() {
		p := metricPair{m.Name, wants[m.Name], m.Value}
		if lowerIsBetter[m.Name] {
			// Abstaining on an answerable query is the loss: 1 − the
			// rate must not drop.
			p = metricPair{"1 - " + m.Name, 1 - p.want, 1 - p.got}
		}
		out = append(out, p)
	}
	return out
}

// lowerIsBetter names the metrics that get worse as they rise.
var lowerIsBetter = map[string]bool{"false_abstain_rate": true, "abstainLostHit@1": true}

// compareMetrics fails on a drop beyond the tolerance and logs a rise.
func compareMetrics(t *testing.T, want, got search.Metrics) {
	t.Helper()
	for _, p := range metricPairs(want, got) {
		switch d := p.got - p.want; {
		case d < -goldenTolerance:
			t.Errorf("%s dropped: %.4f, golden %.4f (%+.4f)", p.name, p.got, p.want, d)
		case d > goldenTolerance:
			t.Logf("%s rose: %.4f, golden %.4f (%+.4f): record it with -update", p.name, p.got, p.want, d)
		}
	}
}

// metricDeltas lists the metrics that moved, e.g. "hit@1 0.7112 → 0.7155
// (+0.0043)", or "" when none did.
func metricDeltas(want, got search.Metrics) string {
	var parts []string
	for _, p := range metricPairs(want, got) {
		if p.got != p.want {
			parts = append(parts, fmt.Sprintf("%s %.4f → %.4f (%+.4f)", p.name, p.want, p.got, p.got-p.want))
		}
	}
	return strings.Join(parts, ", ")
}

// firstChange is a query whose first tool changed.
type firstChange struct {
	q        search.BenchQuery
	was, now string
}

func (c firstChange) String() string {
	rel := func(id string) bool { return slices.Contains(c.q.Relevant, id) }
	verdict := ""
	switch {
	case rel(c.now) && !rel(c.was):
		verdict = " (now right)"
	case rel(c.was) && !rel(c.now):
		verdict = " (now wrong)"
	}
	return fmt.Sprintf("line %d %q: %s → %s%s", c.q.Line, c.q.Query, orNone(c.was), orNone(c.now), verdict)
}

func firstChanges(qs []search.BenchQuery, was, now []string) []firstChange {
	var out []firstChange
	for i, q := range qs {
		if was[i] != now[i] {
			out = append(out, firstChange{q: q, was: was[i], now: now[i]})
		}
	}
	return out
}

// compareFirsts fails when more queries changed their first tool than the
// tolerance allows, and logs every change.
func compareFirsts(t *testing.T, qs []search.BenchQuery, was, now []string) {
	t.Helper()
	ch := firstChanges(qs, was, now)
	if len(ch) == 0 {
		return
	}
	lines := make([]string, len(ch))
	for i, c := range ch {
		lines[i] = "  " + c.String()
	}
	msg := fmt.Sprintf("%d of %d queries changed their first tool:\n%s", len(ch), len(qs), strings.Join(lines, "\n"))
	if allowed := int(goldenTolerance * float64(len(qs))); len(ch) > allowed {
		t.Errorf("%s\n(at most %d may, as near-ties of float sums; a deliberate ranking change is recorded with %s)", msg, allowed, refresh)
		return
	}
	t.Log(msg)
}

func firstsPath(dataset string) string { return filepath.Join(firstsDir, dataset+".tsv") }

// orNone shows an empty ranking's first tool.
func orNone(id string) string {
	if id == "" {
		return "-"
	}
	return id
}

// readFirsts reads a dataset's first tools per mode from path. The file has
// a comment line, a header ("query" and the modes), then one line per
// query: its line in the queries file and its first tool in each mode ("-"
// for none). It is an error when the file lists other queries than qs.
// When it lists the first of them (queries added at the file's end), the
// error says so, and the first tools of the queries it lists (listed of
// them; "" for the others) are returned with it.
func readFirsts(path string, qs []search.BenchQuery) (firsts map[search.Mode][]string, listed int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "#") {
		return nil, 0, fmt.Errorf("%s: want a comment line and a header line first", path)
	}
	header := strings.Split(lines[1], "\t")
	if header[0] != "query" {
		return nil, 0, fmt.Errorf("%s: header %q does not start with query", path, lines[1])
	}
	rows := lines[2:]
	if len(rows) > len(qs) {
		return nil, 0, fmt.Errorf("%s lists %d queries, the dataset has %d", path, len(rows), len(qs))
	}
	out := map[search.Mode][]string{}
	for _, h := range header[1:] {
		out[search.Mode(h)] = make([]string, len(qs))
	}
	for i, row := range rows {
		f := strings.Split(row, "\t")
		if len(f) != len(header) || f[0] != strconv.Itoa(qs[i].Line) {
			return nil, 0, fmt.Errorf("%s line %d: %q, want query line %d and %d columns", path, i+3, row, qs[i].Line, len(header))
		}
		for j, h := range header[1:] {
			if id := f[j+1]; id != "-" {
				out[search.Mode(h)][i] = id
			}
		}
	}
	if len(rows) < len(qs) {
		return out, len(rows), fmt.Errorf("%s lists %d queries, the dataset has %d (%d added at its end)", path, len(rows), len(qs), len(qs)-len(rows))
	}
	return out, len(rows), nil
}

// writeFirsts writes the file readFirsts reads, modes in search.Modes order.
func writeFirsts(dataset string, qs []search.BenchQuery, firsts map[search.Mode][]string) error {
	var modes []search.Mode
	for _, m := range search.Modes {
		if _, ok := firsts[m]; ok {
			modes = append(modes, m)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: the first tool of each query (its line in queries.jsonl) per mode; - = none. Refresh: %s\n", dataset, refresh)
	b.WriteString("query")
	for _, m := range modes {
		b.WriteString("\t" + string(m))
	}
	b.WriteByte('\n')
	for i, q := range qs {
		b.WriteString(strconv.Itoa(q.Line))
		for _, m := range modes {
			b.WriteString("\t" + orNone(firsts[m][i]))
		}
		b.WriteByte('\n')
	}
	if err := os.MkdirAll(firstsDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(firstsPath(dataset), []byte(b.String()), 0o644)
}

func logTable(t *testing.T, measured []*measuredSet) {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dataset\tmode\tHit@1\tHit@5\tRecall@10\tMRR@10\tnDCG@10\t")
	for _, ms := range measured {
		for _, mode := range search.Modes {
			m, ok := ms.metrics.Modes[mode]
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.3f\t%.1f\t\n", ms.name, mode, 100*m.Hit1, 100*m.Hit5, 100*m.Recall10, m.MRR10, 100*m.NDCG10)
		}
	}
	tw.Flush()
	t.Logf("relevance:\n%s", sb.String())
}
