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
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/models"
	"github.com/toolgate/toolgate/search"
)

// The ranking golden test (zoekt style): relevance metrics per dataset and
// mode live in testdata/golden.json; the test recomputes them and fails when
// one drops by more than the tolerance. A rise is logged: record it with
//
//	go test ./search -run Golden -update
//
// (with scripts/native-env.sh sourced, so hybrid/vector/rrf run for real).
// Datasets are keyed by name so new fixtures add a row to goldenSets and an
// entry to the file without touching the others.

var update = flag.Bool("update", false, "rewrite testdata/golden.json with this run's metrics")

const goldenPath = "testdata/golden.json"

// goldenTolerance is the largest drop (absolute, metrics as fractions)
// that still passes: ONNX Runtime's float sums may differ in the last bits
// across machines and flip a near-tie.
const goldenTolerance = 0.005

type goldenFile struct {
	Comment   string                    `json:"comment"`
	Tolerance float64                   `json:"tolerance"`
	Datasets  map[string]*goldenDataset `json:"datasets"`
}

type goldenDataset struct {
	Tools   int                            `json:"tools"`
	Queries int                            `json:"queries"`
	Model   string                         `json:"model,omitempty"`
	Modes   map[search.Mode]search.Metrics `json:"modes"`
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
	tools := gateway.Catalog(pool.Tools())
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

// goldenEmbedder opens the real MiniLM embedder behind a Badger cache in
// the user cache folder, so reruns (and CI reruns) embed nothing new.
func goldenEmbedder(t *testing.T) (index.Embedder, error) {
	e, err := embed.New(nil)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(models.CacheDir(), "test-embeddings")
	c, err := embed.NewCached(e, dir, nil)
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
		t.Fatalf("%v (create it with go test ./search -run Golden -update)", err)
	}
	if want.Datasets == nil {
		want.Datasets = map[string]*goldenDataset{}
	}

	emb, embErr := goldenEmbedder(t)
	if embErr != nil && !errors.Is(embErr, embed.ErrMissing) {
		t.Fatalf("load embedder: %v", embErr)
	}
	ctx := context.Background()
	got := map[string]*goldenDataset{}
	for _, set := range goldenSets {
		t.Run(set.name, func(t *testing.T) {
			tools, qs := set.load(t)
			ix, err := index.Build(ctx, tools, emb, nil)
			if err != nil {
				t.Fatal(err)
			}
			if emb != nil {
				if err := search.WarmQueries(ctx, emb, qs); err != nil {
					t.Fatal(err)
				}
			}
			eng := search.New(ix, emb, nil)
			defer eng.Close()
			gd := &goldenDataset{Tools: len(tools), Queries: len(qs), Modes: map[search.Mode]search.Metrics{}}
			if emb != nil {
				gd.Model = emb.ModelID()
			}
			got[set.name] = gd
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
					gd.Modes[mode] = m
					old := want.Datasets[set.name]
					if *update {
						return
					}
					if old == nil {
						t.Fatalf("dataset %s not in %s: run go test ./search -run Golden -update", set.name, goldenPath)
					}
					wm, ok := old.Modes[mode]
					if !ok {
						t.Fatalf("mode %s of %s not in %s: run go test ./search -run Golden -update", mode, set.name, goldenPath)
					}
					if old.Model != "" && gd.Model != "" && old.Model != gd.Model {
						t.Logf("golden figures were made with %s, this run uses %s", old.Model, gd.Model)
					}
					compareMetrics(t, wm, m)
				})
			}
		})
	}
	logTable(t, got)
	if *update {
		for name, gd := range got {
			if old := want.Datasets[name]; old != nil {
				// Keep modes this run could not measure (no embedder).
				for mode, m := range old.Modes {
					if _, ok := gd.Modes[mode]; !ok {
						gd.Modes[mode] = m
					}
				}
				if gd.Model == "" {
					gd.Model = old.Model
				}
			}
			want.Datasets[name] = gd
		}
		want.Comment = "Ranking golden figures (fractions 0-1) per dataset and mode, default search.Options. Refresh: source scripts/native-env.sh && go test ./search -run Golden -update"
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
		t.Logf("wrote %s", goldenPath)
	}
}

func roundMetrics(m search.Metrics) search.Metrics {
	r := func(x float64) float64 { return math.Round(x*1e4) / 1e4 }
	return search.Metrics{
		Hit1: r(m.Hit1), Hit5: r(m.Hit5), Hit10: r(m.Hit10),
		Recall5: r(m.Recall5), Recall10: r(m.Recall10),
		MRR10: r(m.MRR10), NDCG10: r(m.NDCG10),
		GroupRecall5: r(m.GroupRecall5), GroupRecall10: r(m.GroupRecall10),
	}
}

// compareMetrics fails on a drop beyond the tolerance and logs a rise.
func compareMetrics(t *testing.T, want, got search.Metrics) {
	t.Helper()
	pairs := []struct {
		name      string
		want, got float64
	}{
		{"hit@1", want.Hit1, got.Hit1}, {"hit@5", want.Hit5, got.Hit5}, {"hit@10", want.Hit10, got.Hit10},
		{"recall@5", want.Recall5, got.Recall5}, {"recall@10", want.Recall10, got.Recall10},
		{"mrr@10", want.MRR10, got.MRR10}, {"ndcg@10", want.NDCG10, got.NDCG10},
		{"group_recall@5", want.GroupRecall5, got.GroupRecall5}, {"group_recall@10", want.GroupRecall10, got.GroupRecall10},
	}
	for _, p := range pairs {
		switch d := p.got - p.want; {
		case d < -goldenTolerance:
			t.Errorf("%s dropped: %.4f, golden %.4f (%+.4f)", p.name, p.got, p.want, d)
		case d > goldenTolerance:
			t.Logf("%s rose: %.4f, golden %.4f (%+.4f): record it with -update", p.name, p.got, p.want, d)
		}
	}
}

func logTable(t *testing.T, got map[string]*goldenDataset) {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dataset\tmode\tHit@1\tHit@5\tRecall@10\tMRR@10\tnDCG@10\t")
	for _, set := range goldenSets {
		gd := got[set.name]
		if gd == nil {
			continue
		}
		for _, mode := range search.Modes {
			m, ok := gd.Modes[mode]
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.3f\t%.1f\t\n", set.name, mode, 100*m.Hit1, 100*m.Hit5, 100*m.Recall10, m.MRR10, 100*m.NDCG10)
		}
	}
	tw.Flush()
	t.Logf("relevance:\n%s", sb.String())
}
