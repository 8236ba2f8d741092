package index

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
)

// benchDir holds the shared relevance splits: $TOOLGATE_BENCH_DIR, else
// the shared/ folder beside the clone (as in the search package's tests).
var benchDir = envOr("TOOLGATE_BENCH_DIR", filepath.Join("..", "..", "shared", "bench"))

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// benchMissing skips without the bench data, except on CI (CI=true), where
// a missing split is a failure: a green CI means the figures were checked.
func benchMissing(t testing.TB, name string, err error) {
	t.Helper()
	msg := fmt.Sprintf("bench split %s not available (set TOOLGATE_BENCH_DIR): %v", name, err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

type benchQuery struct {
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
}

type benchMetrics struct {
	N                            int
	Hit1, Recall5, NDCG10, MRR10 float64
}

func (m benchMetrics) String() string {
	return fmt.Sprintf("n=%d Hit@1 %.1f Recall@5 %.1f nDCG@10 %.1f MRR@10 %.3f", m.N, 100*m.Hit1, 100*m.Recall5, 100*m.NDCG10, m.MRR10)
}

func loadBench(t testing.TB, name string) ([]catalog.Tool, []benchQuery) {
	t.Helper()
	dir := filepath.Join(benchDir, name)
	tools, err := catalog.ReadFile(filepath.Join(dir, "tools.jsonl"))
	if err != nil {
		benchMissing(t, name, err)
	}
	f, err := os.Open(filepath.Join(dir, "queries.jsonl"))
	if err != nil {
		benchMissing(t, name, err)
	}
	defer f.Close()
	var qs []benchQuery
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var q benchQuery
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	return tools, qs
}

// evalKeyword computes binary-relevance Hit@1, Recall@5, nDCG@10 and MRR@10
// of Keyword over a query set.
func evalKeyword(t testing.TB, ix *Index, qs []benchQuery) benchMetrics {
	var m benchMetrics
	for _, q := range qs {
		hits, err := ix.Keyword(q.Query, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		rel := map[string]bool{}
		for _, r := range q.Relevant {
			rel[r] = true
		}
		if len(rel) == 0 {
			continue
		}
		m.N++
		var found5, dcg, idcg float64
		rr := 0.0
		for i, h := range hits {
			if !rel[h.ID] {
				continue
			}
			if i == 0 {
				m.Hit1++
			}
			if i < 5 {
				found5++
			}
			dcg += 1 / math.Log2(float64(i+2))
			if rr == 0 {
				rr = 1 / float64(i+1)
			}
		}
		for i := 0; i < min(len(rel), 10); i++ {
			idcg += 1 / math.Log2(float64(i+2))
		}
		m.Recall5 += found5 / float64(len(rel))
		m.NDCG10 += dcg / idcg
		m.MRR10 += rr
	}
	n := float64(m.N)
	m.Hit1 /= n
	m.Recall5 /= n
	m.NDCG10 /= n
	m.MRR10 /= n
	return m
}

// TestBenchBM25 reports BM25-only figures on the shared bench splits and
// guards against falling below the plain-BM25 reference of the bench README.
//
//	go test ./index -run TestBenchBM25 -v
func TestBenchBM25(t *testing.T) {
	ref := map[string]benchMetrics{
		"azure-mcp": {Hit1: 0.724, NDCG10: 0.854},
		"metatool":  {Hit1: 0.373, NDCG10: 0.485},
	}
	for _, name := range []string{"azure-mcp", "metatool"} {
		t.Run(name, func(t *testing.T) {
			tools, qs := loadBench(t, name)
			ix, err := Build(context.Background(), tools, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			m := evalKeyword(t, ix, qs)
			t.Logf("%s: %v", name, m)
			if r := ref[name]; m.NDCG10 < r.NDCG10 {
				t.Errorf("%s: nDCG@10 below the plain-BM25 reference %.1f", name, 100*r.NDCG10)
			}
		})
	}
}
