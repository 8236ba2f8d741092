package search_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/search"
)

// What a run does not measure is written back to golden.json as it was
// read: `-run Golden/bundled -update`, the way to record a query added to
// the bundled fixture, rewrote every other dataset, dropping the metrics
// that are 0 (a Metrics read back from JSON has no query counts, and
// Named leaves out a zero metric of no queries).
func TestGoldenKeepsWhatItDidNotMeasure(t *testing.T) {
	const in = `{
  "comment": "c",
  "tolerance": 0.005,
  "datasets": {
    "azure-mcp": {
      "tools": 180,
      "queries": 232,
      "model": "m",
      "modes": {
        "bm25": {
          "hit@1": 0.7586,
          "ndcg@10": 0.8739,
          "false_abstain_rate": 0,
          "abstainLostHit@1": 0
        }
      }
    }
  }
}`
	var g goldenFile
	if err := json.Unmarshal([]byte(in), &g); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, string(out)); diff != "" {
		t.Errorf("written back otherwise (-read +written):\n%s", diff)
	}
}

// A query added at the end of a dataset's queries file keeps the first
// tools recorded for the others: -update says which of those changed and
// what the added query ranks first; every first tool read as "recorded for
// the first time", so a change of the others went unseen.
func TestGoldenFirstsOfAddedQueries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "set.tsv")
	if err := os.WriteFile(path, []byte("# set\nquery\tbm25\n1\ta__x\n2\t-\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	qs := []search.BenchQuery{{Line: 1}, {Line: 2}, {Line: 3}}
	firsts, listed, err := readFirsts(path, qs)
	if want := path + " lists 2 queries, the dataset has 3 (1 added at its end)"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if diff := cmp.Diff(map[search.Mode][]string{search.ModeBM25: {"a__x", "", ""}}, firsts); diff != "" || listed != 2 {
		t.Errorf("listed %d, want 2; firsts (-want +got):\n%s", listed, diff)
	}
	// Other queries than the file's are not read as its.
	_, listed, err = readFirsts(path, []search.BenchQuery{{Line: 1}, {Line: 5}, {Line: 6}})
	if err == nil || listed != 0 {
		t.Errorf("queries other than the file's: listed %d, error %v", listed, err)
	}
}
