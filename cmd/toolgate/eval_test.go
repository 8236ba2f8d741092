package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/models"
	"github.com/toolgate/toolgate/search"
)

// writeBench writes a tiny bench dataset into <tmp>/tiny and returns the
// tools and queries paths.
func writeBench(t *testing.T, groups bool) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tools := `{"server": "fs", "name": "read_file", "description": "Read the contents of a file.", "input_schema": {"type": "object"}}
{"server": "fs", "name": "write_file", "description": "Write content to a file.", "input_schema": null}
{"server": "git", "name": "git_commit", "description": "Record changes to the repository.", "input_schema": null}
{"server": "odd server", "name": "PDF&URLTool", "description": "Summarise a PDF document from a URL.", "input_schema": null}
`
	queries := `{"query": "read a file", "relevant": ["fs__read_file"]}
{"query": "summarise this PDF document", "relevant": ["odd server__PDF&URLTool"], "subset": "single"}
{"query": "zzz nothing matches", "relevant": ["git__git_commit"]}
`
	if groups {
		queries += `{"query": "write a file then commit the repository", "relevant": ["fs__write_file", "git__git_commit"], "relevant_groups": [["fs__write_file"], ["git__git_commit"]]}
`
	}
	tp, qp := filepath.Join(dir, "tools.jsonl"), filepath.Join(dir, "queries.jsonl")
	if err := os.WriteFile(tp, []byte(tools), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(qp, []byte(queries), 0o644); err != nil {
		t.Fatal(err)
	}
	return tp, qp
}

func evalGlobals(t *testing.T) *globals {
	g := &globals{dataDir: t.TempDir(), logger: slog.New(slog.DiscardHandler)}
	return g
}

func TestEvalJSON(t *testing.T) {
	for _, groups := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "groups"}[groups], func(t *testing.T) {
			tp, qp := writeBench(t, groups)
			var out bytes.Buffer
			err := runEval(context.Background(), evalGlobals(t), &evalFlags{tools: tp, queries: qp, mode: "bm25", json: true, misses: true}, &out)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("want one JSON line for one mode, got %q", out.String())
			}
			var got struct {
				Dataset   string             `json:"dataset"`
				Mode      string             `json:"mode"`
				Tools     int                `json:"tools"`
				Queries   int                `json:"queries"`
				Metrics   map[string]float64 `json:"metrics"`
				LatencyMS map[string]float64 `json:"latencyMs"`
				Misses    []evalMiss         `json:"misses"`
			}
			if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
				t.Fatal(err)
			}
			wantKeys := []string{"hit@1", "hit@10", "hit@5", "mrr@10", "ndcg@10", "recall@10", "recall@5", "false_abstain_rate", "abstainLostHit@1"}
			wantQueries := 3
			if groups {
				wantKeys = append(wantKeys, "groupRecall@10", "groupRecall@5")
				wantQueries = 4
			}
			var keys []string
			for k, v := range got.Metrics {
				keys = append(keys, k)
				if v < 0 || v > 1 {
					t.Errorf("metric %s = %v, want a fraction 0-1", k, v)
				}
			}
			slices.Sort(keys)
			slices.Sort(wantKeys)
			if diff := cmp.Diff(wantKeys, keys); diff != "" {
				t.Errorf("metric keys (-want +got):\n%s", diff)
			}
			if got.Dataset != "tiny" || got.Mode != "bm25" || got.Tools != 4 || got.Queries != wantQueries {
				t.Errorf("header = %q %q %d tools %d queries", got.Dataset, got.Mode, got.Tools, got.Queries)
			}
			if _, ok := got.LatencyMS["p95"]; !ok {
				t.Errorf("latencyMs = %v, want p50 and p95", got.LatencyMS)
			}
			if len(got.Misses) != 1 || got.Misses[0].Line != 3 {
				t.Errorf("misses = %+v, want the query on line 3", got.Misses)
			}
		})
	}
}

func TestEvalTableAndMisses(t *testing.T) {
	tp, qp := writeBench(t, false)
	var out bytes.Buffer
	if err := runEval(context.Background(), evalGlobals(t), &evalFlags{tools: tp, queries: qp, mode: "bm25", misses: true, limitQueries: 3}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dataset tiny: 4 tools, 3 queries", "Hit@1", "nDCG@10", "bm25", `line 3: "zzz nothing matches"`, "want git__git_commit (not in top 10)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Without the embedder, bm25 still reports and the vector modes fail with
// the reason and the install command.
func TestEvalWithoutEmbedder(t *testing.T) {
	tp, qp := writeBench(t, false)
	g := evalGlobals(t)
	g.embedFlags.ORTLib = filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	var out bytes.Buffer
	err := runEval(context.Background(), g, &evalFlags{tools: tp, queries: qp, mode: "all", json: true}, &out)
	if err == nil || !strings.Contains(err.Error(), "vector, hybrid, rrf") || !strings.Contains(err.Error(), "fetch-onnxruntime") {
		t.Errorf("err = %v, want the skipped modes and the install command", err)
	}
	if !strings.Contains(out.String(), `"mode":"bm25"`) || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("output = %q, want the bm25 line only", out.String())
	}
	out.Reset()
	err = runEval(context.Background(), g, &evalFlags{tools: tp, queries: qp, mode: "hybrid"}, &out)
	if err == nil || !strings.Contains(err.Error(), "mode hybrid needs the embedding model") {
		t.Errorf("err = %v", err)
	}
}

// TestEvalLearnFromCheckedFirst: a --learn-from log that shares queries
// with --queries is refused before the model loads and the index is built
// (about 7 s at metatool's 199 tools on 2 cores, spent for nothing): here,
// with no ONNX Runtime, it is the refusal rather than the missing model.
func TestEvalLearnFromCheckedFirst(t *testing.T) {
	tp, qp := writeBench(t, false)
	g := evalGlobals(t)
	g.embedFlags.ORTLib = filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	err := runEval(context.Background(), g, &evalFlags{tools: tp, queries: qp, learnFrom: qp, mode: "hybrid"}, &bytes.Buffer{})
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--learn-from "+qp+" shares 3 queries with --queries") {
		t.Errorf("err = %v, want the usage error of the shared queries, before the model is needed", err)
	}
}

func TestEvalErrors(t *testing.T) {
	tp, qp := writeBench(t, false)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"query": "x", "relevant": ["fs__nope"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(t.TempDir(), "list.json")
	if err := os.WriteFile(list, []byte(`{"tools": [{"name": "read_file", "inputSchema": {"type": "object"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	unknownLearned := filepath.Join(t.TempDir(), "learned.jsonl")
	if err := os.WriteFile(unknownLearned, []byte(`{"query": "show my notes", "relevant": ["fs__raed_file"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	latin1 := filepath.Join(t.TempDir(), "latin1.jsonl")
	if err := os.WriteFile(latin1, []byte("{\"query\": \"read the caf\xe9 menu\", \"relevant\": [\"fs__read_file\"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		f     evalFlags
		usage bool
		want  string
	}{
		{"no files", evalFlags{mode: "all"}, true, "needs --tools and either --queries or --exact-names"},
		{"queries not UTF-8", evalFlags{tools: tp, queries: latin1, mode: "bm25"}, true, latin1 + ":1: not UTF-8 text at column 24 (byte 0xe9)"},
		{"queries and exact names", evalFlags{tools: tp, queries: qp, exactNames: true, mode: "bm25"}, true, "--queries and --exact-names exclude each other"},
		{"bad mode", evalFlags{tools: tp, queries: qp, mode: "fast"}, true, `--mode "fast"`},
		{"bad norm", evalFlags{tools: tp, queries: qp, mode: "bm25", vectorNorm: "log"}, true, "--vector-norm"},
		{"negative limit", evalFlags{tools: tp, queries: qp, mode: "bm25", limitQueries: -1}, true, "--limit-queries"},
		// The config's range checks (toolgate.search.minConfidence: 2 is refused there).
		{"min confidence above 1", evalFlags{tools: tp, queries: qp, mode: "bm25", minConfidence: 2}, true, "--min-confidence 2 is out of range: use a confidence from 0 to 1"},
		{"step weight above 1", evalFlags{tools: tp, queries: qp, mode: "bm25", stepWeight: 5}, true, "--step-weight 5 is out of range: use a weight from 0 to 1"},
		// A file that cannot be read as its flag's is the flag's wrong
		// value: exit status 2, as the other usage errors.
		{"missing file", evalFlags{tools: tp + ".nope", queries: qp, mode: "bm25"}, true, "no such file"},
		{"unknown relevant", evalFlags{tools: tp, queries: bad, mode: "bm25"}, true, bad + `:1: relevant "fs__nope" is not a tool of the catalog`},
		{"tools/list result", evalFlags{tools: list, queries: qp, mode: "bm25"}, true, list + ` is an MCP tools/list result ({"tools": [...]}), not JSON lines of tools`},
		{"bad no-answer file", evalFlags{tools: tp, queries: qp, noAnswer: list, mode: "bm25"}, true, list + `:1: empty "query"`},
		// A learned pair of a tool the catalog lacks taught nothing.
		{"unknown learned tool", evalFlags{tools: tp, queries: qp, learnFrom: unknownLearned, mode: "bm25"}, true, unknownLearned + `:1: relevant "fs__raed_file" is not a tool of the catalog: did you mean "fs__read_file"?`},
		// The files given the wrong way round: said so, not `queries.jsonl:1: missing "server"`.
		{"swapped", evalFlags{tools: qp, queries: tp, mode: "bm25"}, true,
			"--tools " + qp + " and --queries " + tp + ` look swapped: the first is a queries file (line 1 has "query"), the second a tools file (line 1 has "server"); pass --tools ` + tp + " --queries " + qp},
		{"queries as tools", evalFlags{tools: qp, exactNames: true, mode: "bm25"}, true, "--tools " + qp + ` looks like a queries file (line 1 has "query"), not a tools file: are the files swapped? (` + qp + `:1: missing "server")`},
		{"tools as queries", evalFlags{tools: tp, queries: tp, mode: "bm25"}, true, "--queries " + tp + ` looks like a tools file (line 1 has "server"), not a queries file: are the files swapped? (` + tp + `:1: empty "query")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runEval(context.Background(), evalGlobals(t), &tt.f, &bytes.Buffer{})
			var ue usageError
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.As(err, &ue) != tt.usage {
				t.Errorf("err = %v (usage error: %v), want %q (usage error: %v)", err, errors.As(err, &ue), tt.want, tt.usage)
			}
		})
	}
}

// With the real embedder every mode reports, in the order bm25, vector,
// hybrid, rrf.
func TestEvalAllModes(t *testing.T) {
	tp, qp := writeBench(t, true)
	g := evalGlobals(t)
	g.embedFlags.ModelDir = installedModels() // the installed model; caches stay in the temp data dir
	if _, c, err := g.openEmbedder(context.Background(), nil); err != nil {
		testenv.Missing(t, "embedder unavailable (make deps): %v", err)
	} else {
		c.Close()
	}
	var out bytes.Buffer
	if err := runEval(context.Background(), g, &evalFlags{tools: tp, queries: qp, mode: "all", json: true, bootstrap: 100}, &out); err != nil {
		t.Fatal(err)
	}
	var modes []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var l struct {
			Mode    string             `json:"mode"`
			Metrics map[string]float64 `json:"metrics"`
			Paired  *struct {
				Baseline string                 `json:"baseline"`
				Diff     map[string]search.Diff `json:"diff"`
			} `json:"paired"`
			Run evalRun `json:"run"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		modes = append(modes, l.Mode)
		if l.Metrics["hit@5"] < 0.5 {
			t.Errorf("%s: hit@5 %v on an easy set", l.Mode, l.Metrics["hit@5"])
		}
		// --bootstrap compares each mode to hybrid on the same queries.
		switch {
		case l.Mode == "hybrid" && l.Paired != nil:
			t.Errorf("hybrid is compared to itself: %+v", l.Paired)
		case l.Mode != "hybrid" && (l.Paired == nil || l.Paired.Baseline != "hybrid" || len(l.Paired.Diff) != 7):
			t.Errorf("%s: paired %+v, want the 7 ranking metrics' differences to hybrid", l.Mode, l.Paired)
		}
		if !strings.HasPrefix(l.Run.Model, "all-MiniLM-L6-v2/") || l.Run.ONNXRuntime == "" || len(l.Run.ModelSHA256) != 64 || !strings.Contains(l.Run.Model, "@"+l.Run.ModelSHA256[:12]) {
			t.Errorf("%s: run names model %q (sha256 %q), onnxruntime %q", l.Mode, l.Run.Model, l.Run.ModelSHA256, l.Run.ONNXRuntime)
		}
	}
	if diff := cmp.Diff([]string{"bm25", "vector", "hybrid", "rrf"}, modes); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
}

// writeForeign writes another catalog's queries, for --no-answer: "book a
// flight to Paris" and second.
func writeForeign(t *testing.T, second string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "foreign.jsonl")
	lines := `{"query": "book a flight to Paris", "relevant": ["air__book"]}` + "\n" +
		`{"query": "` + second + `", "relevant": ["wx__forecast"]}` + "\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// --no-answer adds another file's queries as no-answer queries: the table
// and the JSON gain the abstain rate, and the ranking metrics stay those of
// the answerable queries.
func TestEvalNoAnswer(t *testing.T) {
	tp, qp := writeBench(t, false)
	foreign := writeForeign(t, "weather in Oslo tomorrow")
	var out bytes.Buffer
	f := &evalFlags{tools: tp, queries: qp, noAnswer: foreign, mode: "bm25", json: true}
	if err := runEval(context.Background(), evalGlobals(t), f, &out); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Queries int                `json:"queries"`
		Metrics map[string]float64 `json:"metrics"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// Neither foreign query shares a word with the catalog: both abstain.
	if got.Queries != 5 || got.Metrics["abstain_rate"] != 1 || got.Metrics["hit@1"] == 0 {
		t.Errorf("queries %d, metrics %v: want 5 queries, abstain_rate 1 and the answerable queries' hit@1", got.Queries, got.Metrics)
	}
	out.Reset()
	f.json = false
	if err := runEval(context.Background(), evalGlobals(t), f, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"5 queries (3 answerable, 2 no-answer)", "FalseAbst", "Abstain"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// A no-answer query of --no-answer's file that was answered is listed by
// --misses at its line in that file, the file named: it said "line 5"
// (its place after --queries' 3) of a file of 2 lines. The keys of --json
// are contracts: a rename fails here.
func TestEvalNoAnswerMisses(t *testing.T) {
	tp, qp := writeBench(t, false)
	foreign := writeForeign(t, "read a file aloud")
	var out bytes.Buffer
	f := &evalFlags{tools: tp, queries: qp, noAnswer: foreign, mode: "bm25", misses: true, json: true}
	if err := runEval(context.Background(), evalGlobals(t), f, &out); err != nil {
		t.Fatal(err)
	}
	var line map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"dataset", "latencyMs", "metrics", "misses", "mode", "queries", "run", "tools"}, slices.Sorted(maps.Keys(line))); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	var misses []map[string]any
	if err := json.Unmarshal(line["misses"], &misses); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"file": qp, "line": 3.0, "query": "zzz nothing matches", "relevant": []any{"git__git_commit"}, "top": []any{}},
		{"file": foreign, "line": 2.0, "query": "read a file aloud", "relevant": []any{}, "top": []any{"fs__read_file", "fs__write_file"}},
	}
	if diff := cmp.Diff(want, misses); diff != "" {
		t.Errorf("misses (-want +got):\n%s", diff)
	}
	out.Reset()
	f.json = false
	if err := runEval(context.Background(), evalGlobals(t), f, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bm25: 2 queries with no relevant tool", `  line 3: "zzz nothing matches"`, "  " + foreign + ` line 2: "read a file aloud"` + "\n    want noMatch"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// A tools file with an input schema the gateway cannot read is evaluated,
// with a warning on stderr naming the tool.
func TestEvalWarnsOfSchemas(t *testing.T) {
	tp, qp := writeBench(t, false)
	b, err := os.ReadFile(tp)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"input_schema": {"type": "object"}`), []byte(`"input_schema": {"type": "object", "properties": ["path"]}`), 1)
	if err := os.WriteFile(tp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, warnings bytes.Buffer
	if err := runEval(context.Background(), evalGlobals(t), &evalFlags{tools: tp, queries: qp, mode: "bm25", warnings: &warnings}, &out); err != nil {
		t.Fatal(err)
	}
	if want := `"fs__read_file" ("properties" must be an object, not a JSON array)`; !strings.Contains(warnings.String(), want) || !strings.Contains(out.String(), "dataset tiny") {
		t.Errorf("warnings %q, want %q, and the figures", warnings.String(), want)
	}
}

// --exact-names asks for every tool by its bare name and its ID.
func TestEvalExactNames(t *testing.T) {
	tp, _ := writeBench(t, false)
	var out bytes.Buffer
	if err := runEval(context.Background(), evalGlobals(t), &evalFlags{tools: tp, exactNames: true, mode: "bm25", json: true}, &out); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Dataset string             `json:"dataset"`
		Queries int                `json:"queries"`
		Metrics map[string]float64 `json:"metrics"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Dataset != "tiny (exact names)" || got.Queries != 8 || got.Metrics["hit@1"] != 1 {
		t.Errorf("got %+v, want 8 queries (4 names, 4 IDs) at hit@1 1", got)
	}
}

// --thresholds reports each threshold's abstain rates from one run, the
// same as a run at that --min-confidence gives, and leaves the main
// metrics those of --min-confidence.
func TestEvalThresholds(t *testing.T) {
	tp, qp := writeBench(t, false)
	foreign := writeForeign(t, "read the weather file in Oslo")
	type line struct {
		Metrics    map[string]float64   `json:"metrics"`
		Thresholds []map[string]float64 `json:"thresholds"`
	}
	run := func(f evalFlags) line {
		t.Helper()
		f.tools, f.queries, f.noAnswer, f.mode, f.json = tp, qp, foreign, "bm25", true
		var out bytes.Buffer
		if err := runEval(context.Background(), evalGlobals(t), &f, &out); err != nil {
			t.Fatal(err)
		}
		var l line
		if err := json.Unmarshal(out.Bytes(), &l); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return l
	}
	ts := []float64{0.05, 0.1, 0.6, 0.99}
	swept := run(evalFlags{thresholds: ts})
	if diff := cmp.Diff(run(evalFlags{}).Metrics, swept.Metrics); diff != "" {
		t.Errorf("--thresholds changed the main metrics (-without +with):\n%s", diff)
	}
	if len(swept.Thresholds) != len(ts) {
		t.Fatalf("%d thresholds reported, want %d: %v", len(swept.Thresholds), len(ts), swept.Thresholds)
	}
	seen := map[float64]bool{}
	for i, th := range ts {
		alone := run(evalFlags{minConfidence: th}).Metrics
		want := map[string]float64{"minConfidence": th}
		for _, k := range []string{"false_abstain_rate", "abstainLostHit@1", "abstain_rate"} {
			want[k] = alone[k]
		}
		if diff := cmp.Diff(want, swept.Thresholds[i]); diff != "" {
			t.Errorf("threshold %v (-a run at it +the sweep):\n%s", th, diff)
		}
		seen[alone["false_abstain_rate"]+alone["abstain_rate"]] = true
	}
	if len(seen) < 3 {
		t.Errorf("the thresholds gave only %d different abstain rates: the test needs them spread", len(seen))
	}

	var out bytes.Buffer
	if err := runEval(context.Background(), evalGlobals(t), &evalFlags{tools: tp, queries: qp, noAnswer: foreign, mode: "bm25", thresholds: ts}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bm25: abstain rates by minConfidence (one run, at 0.99)", "minConfidence  false_abstain_rate  abstainLostHit@1  abstain_rate", "0.99"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	var ue usageError
	if err := runEval(context.Background(), evalGlobals(t), &evalFlags{tools: tp, queries: qp, mode: "bm25", thresholds: []float64{1.5}}, &out); !errors.As(err, &ue) || !strings.Contains(err.Error(), "1.5 is out of range: use a confidence from 0 to 1") {
		t.Errorf("--thresholds 1.5: %v, want a usage error", err)
	}
}

// TestEvalFlagZeroIsOff: --min-confidence 0 and --step-weight 0 are what
// toolgate.search's minConfidence and stepWeight of 0 are, the feature off
// (never noMatch; whole queries only), as the README says the flags take
// what the settings take; they evaluated at the defaults, 0.09 and 0.7.
func TestEvalFlagZeroIsOff(t *testing.T) {
	tp, qp := writeBench(t, true)
	foreign := writeForeign(t, "weather in Oslo tomorrow")
	type line struct {
		Metrics map[string]float64 `json:"metrics"`
		Run     struct {
			Settings struct {
				MinConfidence float64 `json:"minConfidence"`
				StepWeight    float64 `json:"stepWeight"`
			} `json:"settings"`
		} `json:"run"`
	}
	eval := func(args ...string) line {
		t.Helper()
		cmd, _ := newRootCmd(nil)
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"eval", "--data-dir", t.TempDir(), "--tools", tp, "--queries", qp,
			"--no-answer", foreign, "--mode", "bm25", "--json"}, args...))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("eval %v: %v\n%s", args, err, errOut.String())
		}
		var l line
		if err := json.Unmarshal(out.Bytes(), &l); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return l
	}
	def := eval()
	if def.Metrics["abstain_rate"] == 0 || def.Run.Settings.MinConfidence != search.DefaultMinConfidence || def.Run.Settings.StepWeight != search.DefaultStepWeight {
		t.Fatalf("default run: abstain_rate %v, settings %+v: the test needs the foreign queries abstained on at the defaults", def.Metrics["abstain_rate"], def.Run.Settings)
	}
	zero := eval("--min-confidence", "0", "--step-weight", "0")
	if zero.Metrics["abstain_rate"] != 0 || zero.Metrics["false_abstain_rate"] != 0 {
		t.Errorf("--min-confidence 0: abstain_rate %v, false_abstain_rate %v: want 0 and 0 (never noMatch, as minConfidence: 0)",
			zero.Metrics["abstain_rate"], zero.Metrics["false_abstain_rate"])
	}
	if zero.Run.Settings.MinConfidence >= 0 || zero.Run.Settings.StepWeight >= 0 {
		t.Errorf("--min-confidence 0 --step-weight 0: settings %+v, want both off (negative), not the defaults", zero.Run.Settings)
	}
	if off := eval("--min-confidence", "-1", "--step-weight", "-1"); !cmp.Equal(off.Metrics, zero.Metrics) {
		t.Errorf("0 and -1 differ: %v against %v", zero.Metrics, off.Metrics)
	}
}

// TestEvalInterrupted: SIGINT during `toolgate eval` says that it was
// stopped, as index and models fetch say it (shutdown.Stopped), exit
// status 1; it said "build index: embed tools 1-199 of 199: context
// canceled", which read as a fault.
func TestEvalInterrupted(t *testing.T) {
	cmd := toolgateCmd(t, t.TempDir(), "eval", "--tools", writeToolsFile(t, t.TempDir(), 3000, ""), "--exact-names")
	out, err, loaded := interruptAt(t, cmd, "embedder loaded") // the index build has begun: stop it
	if !loaded {
		testenv.Missing(t, "embedder unavailable (make deps):\n%s", out)
	}
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 ||
		!strings.Contains(out, "toolgate: stopped before the evaluation was done: ") || strings.Contains(out, "context canceled") {
		t.Errorf("eval stopped by SIGINT: %v, want exit status 1 saying it stopped\n%s", err, out)
	}
}

// eval on a data folder whose embedding cache a gateway holds keeps its
// vectors in memory for the run: its latency figures are those of a search
// whose query vector is cached, as its help says. It embedded without the
// cache, so each timed search embedded its query again (vector p50 8.0 ms
// instead of 0.2 ms at azure-mcp's tools).
func TestEvalCacheHeld(t *testing.T) {
	tp, qp := writeBench(t, false)
	g := evalGlobals(t)
	var logs testenv.LogBuffer
	g.logger = slog.New(slog.NewTextHandler(&logs, nil))
	g.embedFlags.ModelDir = installedModels()
	holder, err := embed.NewCached(heldModel{}, g.embeddingCacheDir(), nil) // the gateway's hold
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var out bytes.Buffer
	err = runEval(context.Background(), g, &evalFlags{tools: tp, queries: qp, mode: "vector", json: true}, &out)
	if err != nil && strings.Contains(err.Error(), "needs the embedding model") {
		testenv.Missing(t, "embedder unavailable (make deps): %v", err)
	}
	if err != nil || !strings.Contains(out.String(), `"mode":"vector"`) {
		t.Fatalf("eval beside a held cache: %v\n%s", err, out.String())
	}
	if !strings.Contains(logs.String(), "this run keeps its vectors in memory") {
		t.Errorf("eval did not keep its vectors in memory:\n%s", logs.String())
	}
}

// heldModel stands for the model of the process that holds a cache.
type heldModel struct{}

func (heldModel) ModelID() string { return "held" }
func (heldModel) Dim() int        { return 4 }
func (heldModel) Embed(_ context.Context, texts []string) ([][]float32, error) {
	return make([][]float32, len(texts)), nil
}

// eval whose output's reader has gone (`| head -1` after the first mode's
// line, a jq that failed) stops at its next write and exits 0, its stores
// closed: it died of SIGPIPE (exit status 141, a failed CI step under
// pipefail). Its stdout here is a pipe whose read end is closed before it
// starts, so its first line meets the gone reader.
func TestEvalReaderGone(t *testing.T) {
	tp, qp := writeBench(t, false)
	cmd := toolgateCmd(t, t.TempDir(), "eval", "--tools", tp, "--queries", qp, "--mode", "bm25", "--json")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	err = cmd.Run()
	if err != nil {
		t.Errorf("eval into a closed pipe: %v (%s), want exit status 0\n%s", err, cmd.ProcessState, stderr.String())
	}
	if strings.Contains(stderr.String(), "broken pipe") {
		t.Errorf("eval into a closed pipe says so at level info or above:\n%s", stderr.String())
	}
}

// Two runs of one eval give the same --json lines but for "latencyMs",
// and each line says what they came from: the files' SHA-256, the
// settings in effect, --bootstrap's replicates and seed.
func TestEvalRunReproducible(t *testing.T) {
	tp, qp := writeBench(t, false)
	f := &evalFlags{tools: tp, queries: qp, mode: "bm25", json: true, bootstrap: 200, stepWeight: 0.5}
	var runs []string
	for range 2 {
		var out bytes.Buffer
		if err := runEval(context.Background(), evalGlobals(t), f, &out); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, regexp.MustCompile(`"latencyMs":\{[^}]*\}`).ReplaceAllString(out.String(), `"latencyMs":{}`))
	}
	if d := cmp.Diff(runs[0], runs[1]); d != "" {
		t.Errorf("a second run differs (-first +second):\n%s", d)
	}
	var l struct {
		CI95   map[string]search.Interval `json:"ci95"`
		Paired any                        `json:"paired"`
		Run    evalRun                    `json:"run"`
	}
	if err := json.Unmarshal([]byte(runs[0]), &l); err != nil {
		t.Fatal(err)
	}
	toolsSum, _ := models.FileSHA256(tp)
	queriesSum, _ := models.FileSHA256(qp)
	want := evalRun{Toolgate: version, SHA256: map[string]string{"tools": toolsSum, "queries": queriesSum},
		Settings: evalSettings{
			KeywordWeight: search.DefaultKeywordWeight, VectorWeight: search.DefaultVectorWeight, Candidates: search.DefaultCandidates,
			RRFK: search.DefaultRRFK, KeywordNorm: "max", VectorNorm: "mean", StepWeight: 0.5,
			MinConfidence: search.DefaultMinConfidence, SearchedAt: search.DefaultMinConfidence, Depth: search.EvalDepth,
		},
		Bootstrap: &evalBootstrap{Replicates: 200, Seed: search.BootstrapSeed}}
	want.Commit, want.CommitUnknown = buildCommit()
	if d := cmp.Diff(want, l.Run); d != "" {
		t.Errorf("run (-want +got):\n%s", d)
	}
	if len(l.CI95) != 7 || l.Paired != nil {
		t.Errorf("one mode: ci95 %v (want the 7 ranking metrics), paired %v (want none)", l.CI95, l.Paired)
	}
	var table bytes.Buffer
	f.json = false
	if err := runEval(context.Background(), evalGlobals(t), f, &table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "95% intervals (bootstrap over the queries, 200 resamples, seed 1)") {
		t.Errorf("the table has no intervals:\n%s", table.String())
	}
	f.baseline = "vector"
	err := runEval(context.Background(), evalGlobals(t), f, io.Discard)
	if ue := (usageError{}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--baseline") {
		t.Errorf("--baseline of a mode not run: %v, want a usage error", err)
	}
}

// A query asked twice (spacing aside), in --queries or again in
// --no-answer, is evaluated each time, with a warning naming the places:
// a file joined from two sources counted its repeats silently.
func TestEvalWarnsOfRepeatedQueries(t *testing.T) {
	tp, qp := writeBench(t, false)
	f, err := os.OpenFile(qp, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"query": "read  a file ", "relevant": ["fs__read_file"]}` + "\n")
	f.Close()
	foreign := writeForeign(t, "read a file")
	var out, warnings bytes.Buffer
	if err := runEval(context.Background(), evalGlobals(t), &evalFlags{tools: tp, queries: qp, noAnswer: foreign, mode: "bm25", json: true, warnings: &warnings}, &out); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`toolgate: warning: 2 queries asked again, and each asking counts in the figures: %[1]s:4 repeats line 1 ("read a file"), %[2]s:2 repeats %[1]s:1 ("read a file"): drop the repeats to count each query once`+"\n", qp, foreign)
	if !strings.Contains(warnings.String(), "\n"+want) {
		t.Errorf("warnings:\n%s\nwant\n%s", warnings.String(), want)
	}
	var line struct{ Queries int }
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || line.Queries != 6 {
		t.Errorf("queries %d (%v), want all 6 evaluated", line.Queries, err)
	}
}

// --per-query adds each query's figures, in query order, with its file and
// line: they average to the line's metrics, so a notebook can run tests of
// its own (a paired test between two modes, per subset).
func TestEvalPerQuery(t *testing.T) {
	tp, qp := writeBench(t, true)
	foreign := writeForeign(t, "forecast the weather")
	var out bytes.Buffer
	f := &evalFlags{tools: tp, queries: qp, noAnswer: foreign, mode: "bm25", json: true, perQuery: true}
	if err := runEval(context.Background(), evalGlobals(t), f, &out); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Queries  int                `json:"queries"`
		Metrics  map[string]float64 `json:"metrics"`
		PerQuery []struct {
			File    string             `json:"file"`
			Line    int                `json:"line"`
			Rank    int                `json:"rank"`
			NoMatch bool               `json:"noMatch"`
			Metrics map[string]float64 `json:"metrics"`
		} `json:"perQuery"`
	}
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if len(line.PerQuery) != line.Queries || line.Queries != 6 {
		t.Fatalf("%d per-query entries for %d queries, want 6", len(line.PerQuery), line.Queries)
	}
	sums := map[string]float64{}
	n := map[string]int{}
	for i, q := range line.PerQuery {
		wantFile, wantLine := qp, i+1
		if i >= 4 {
			wantFile, wantLine = foreign, i-3
		}
		if q.File != wantFile || q.Line != wantLine {
			t.Errorf("entry %d is %s:%d, want %s:%d", i, q.File, q.Line, wantFile, wantLine)
		}
		if (q.Rank == 1) != (q.Metrics["hit@1"] == 1) && i < 4 {
			t.Errorf("%s:%d: rank %d but hit@1 %v", q.File, q.Line, q.Rank, q.Metrics["hit@1"])
		}
		for k, v := range q.Metrics {
			sums[k] += v
			n[k]++
		}
	}
	for k, v := range line.Metrics {
		if got := sums[k] / float64(n[k]); math.Abs(got-v) > 1e-12 {
			t.Errorf("%s: per-query mean %v, line %v", k, got, v)
		}
	}
	f.json = false
	err := runEval(context.Background(), evalGlobals(t), f, io.Discard)
	if ue := (usageError{}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--json") {
		t.Errorf("--per-query without --json: %v, want a usage error", err)
	}
}

// eval shows on stderr how far its embedding is, as index does, and then
// its searches, mode by mode: a first run of 4,927 tools and 8,904 queries
// said nothing for minutes after "embedder loaded", and a cached one for
// 110 s after "queries embedded". Its --json lines on stdout are unchanged.
func TestEvalProgress(t *testing.T) {
	tp, qp := writeBench(t, false)
	cmd := toolgateCmd(t, t.TempDir(), "eval", "--tools", tp, "--queries", qp, "--mode", "vector", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && strings.Contains(stderr.String(), "needs the embedding model") {
		testenv.Missing(t, "embedder unavailable (make deps):\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"embedding: 0/4 tools (", "embedding: 4/4 tools (", "embedding: 0/3 queries (", "embedding: 3/3 queries (", "searching vector: 1/3 queries (", "searching vector: 3/3 queries ("} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stdout.String(), "embedding") || strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("stdout = %q, want the vector line alone", stdout.String())
	}
}

// A run stopped (Ctrl-C) after a mode was done still writes that mode's
// figures, as its message says ("no figures are written for the modes it
// had not finished"): the table and --bootstrap's lines, written after the
// last mode, had none of the modes done (bm25 and vector of --mode all,
// after 40 s at 4,927 tools and 8,904 queries). --json lines without
// --bootstrap were already written as each mode was done.
func TestEvalStoppedKeepsModesDone(t *testing.T) {
	tp, qp := writeBench(t, false)
	for _, tt := range []struct {
		name      string
		f         evalFlags
		want, not string
	}{
		{"table", evalFlags{}, "bm25", "vector"},
		{"bootstrap", evalFlags{json: true, bootstrap: 10}, `"mode":"bm25"`, `"mode":"vector"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := evalGlobals(t)
			g.embedFlags.ModelDir = installedModels()
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			f := tt.f
			f.tools, f.queries, f.mode = tp, qp, "all"
			f.modeDone = func(m search.Mode) {
				if m == search.ModeBM25 {
					stop() // Ctrl-C once bm25 is done
				}
			}
			var out bytes.Buffer
			err := runEval(ctx, g, &f, &out)
			if err != nil && strings.Contains(err.Error(), "needs the embedding model") {
				testenv.Missing(t, "embedder unavailable (make deps): %v", err)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want the stop", err)
			}
			if !strings.Contains(out.String(), tt.want) || strings.Contains(out.String(), tt.not) {
				t.Errorf("output of a run stopped after bm25 = %q, want bm25's figures alone", out.String())
			}
		})
	}
}
