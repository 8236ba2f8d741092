package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shutdown"
	"github.com/toolgate/toolgate/models"
	"github.com/toolgate/toolgate/search"
	"github.com/toolgate/toolgate/search/learn"
)

func init() { register(newEvalCmd) }

type evalFlags struct {
	tools, queries string
	dataset        string
	mode           string
	json, misses   bool
	exactNames     bool
	noAnswer       string
	learnFrom      string
	minConfidence  float64
	thresholds     []float64
	stepWeight     float64
	limitQueries   int
	candidates     int
	keywordNorm    string
	vectorNorm     string
	bootstrap      int
	baseline       string
	perQuery       bool
	// warnings is where the files' warnings go (stderr; nil: nowhere).
	warnings io.Writer
	// progress is where the embedding progress goes (stderr; nil:
	// nowhere), as index shows it: a first run of 5,000 tools and 9,000
	// queries embeds for minutes.
	progress io.Writer
	// modeDone, when not nil, is called as each mode's figures are done
	// (tests stop the run there).
	modeDone func(search.Mode)
}

func newEvalCmd(g *globals) *cobra.Command {
	f := &evalFlags{}
	cmd := &cobra.Command{
		Use:   "eval --tools TOOLS.jsonl (--queries QUERIES.jsonl | --exact-names)",
		Short: "Measure search relevance on a benchmark (Hit@k, Recall@k, MRR, nDCG, latency)",
		Long: `eval builds an in-memory index of the tools, runs every query through the
ranker and reports Hit@1/5/10, Recall@5/10, MRR@10, nDCG@10 (binary relevance),
GroupRecall@5/10 when queries have relevant_groups, and per-query search latency
p50/p95. Files use the bench format of ../shared/bench/README.md.

Embeddings go through the cached embedder, so repeated runs re-embed nothing.
Query vectors are computed in batches before timing, so the latency is that
of a search whose query vector is in the cache (ranking plus cache lookup).
A data folder whose cache cannot be had (a gateway on it holds it, it is
read-only) gives the run a cache in memory, kept for that run only.

With --json, each mode prints one line:
{"dataset","mode","tools","queries","metrics":{"hit@1",…,"ndcg@10"},"latencyMs":{"p50","p95"}}
with metrics as fractions 0–1 (and "thresholds":[{"minConfidence",
"false_abstain_rate","abstainLostHit@1","abstain_rate"},…] with --thresholds,
"misses":[{"file","line","query","relevant","rank"?,"top"},…] with --misses),
and "run":{"toolgate","commit"?,"model"?,"onnxruntime"?,"sha256","settings",
"bootstrap"?}: what the figures came from (two runs of one "run" print the
same lines but for "latencyMs"). --bootstrap N adds "ci95" (each ranking
metric's 95% interval) and "paired" (the difference to --baseline's mode on
the same queries: "mean", "ci95", "p"); --per-query adds "perQuery":
[{"file","line","rank"?,"noMatch","metrics"},…], each query's figures.

Each file is JSON lines, one object a line; a mistake in one is a usage error
(exit status 2) naming the file, the line and the fix.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A stop said as index and models fetch say it: it said
			// "build index: embed tools 1-199 of 199: context canceled".
			f.warnings = cmd.ErrOrStderr()
			f.progress = cmd.ErrOrStderr()
			// 0 given is what toolgate.search's 0 is, the feature off
			// (never noMatch; whole queries only), as search --config
			// reads the setting: it evaluated at the default instead.
			for name, v := range map[string]*float64{"min-confidence": &f.minConfidence, "step-weight": &f.stepWeight} {
				if cmd.Flags().Changed(name) {
					*v = zeroIsOff(v)
				}
			}
			// A reader that stops early is a write error, at which eval
			// stops and exits 0 with its stores closed.
			err := readerMayLeave(g, "eval", func() error { return runEval(cmd.Context(), g, f, cmd.OutOrStdout()) })
			return shutdown.Stopped(cmd.Context(), err, "the evaluation was done", "no figures are written for the modes it had not finished (run the command again)")
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.tools, "tools", "", "tools file (bench JSONL: server, name, description, input_schema)")
	fl.StringVar(&f.queries, "queries", "", "queries file (bench JSONL: query, relevant, relevant_groups?)")
	fl.StringVar(&f.dataset, "dataset", "", "dataset name in the output (default: the tools file's folder name)")
	fl.StringVar(&f.mode, "mode", "all", "ranking mode: hybrid, bm25, vector, rrf or all")
	fl.BoolVar(&f.json, "json", false, "print one JSON object per mode per line instead of a table")
	fl.BoolVar(&f.misses, "misses", false, "list the queries with no relevant tool in the top 5, and what came first")
	fl.BoolVar(&f.exactNames, "exact-names", false, "instead of --queries, ask for each tool by its bare name and by its server__tool ID (exact names rank first: Hit@1 should be 1)")
	fl.StringVar(&f.noAnswer, "no-answer", "", "also ask the queries of this file (bench JSONL, e.g. another catalog's) as no-answer queries: their right answer is noMatch")
	fl.StringVar(&f.learnFrom, "learn-from", "", "learn from this log of (query, relevant tools) in the queries format before evaluating, as if each query had led to its tools (it must share no query with --queries)")
	fl.Float64Var(&f.minConfidence, "min-confidence", 0, fmt.Sprintf("confidence the best hit needs for the answer not to be noMatch (default %v; 0 or negative: never noMatch)", search.DefaultMinConfidence))
	fl.Float64SliceVar(&f.thresholds, "thresholds", nil, "also report the abstain rates at each of these minConfidence values, a comma-separated `LIST` (e.g. 0.05,0.07,0.09,0.12), all read from one run at the largest")
	fl.Lookup("thresholds").DefValue = "" // none: --help showed "(default [])"
	fl.Float64Var(&f.stepWeight, "step-weight", 0, fmt.Sprintf("weight of each part's ranking for a query of several steps, against the whole query's (hybrid; default %v; 0 or negative: whole queries only)", search.DefaultStepWeight))
	fl.IntVar(&f.limitQueries, "limit-queries", 0, "use only the first N queries (0: all)")
	fl.IntVar(&f.candidates, "candidates", 0, fmt.Sprintf("top-N of each signal fused by hybrid and rrf (default %d)", search.DefaultCandidates))
	fl.StringVar(&f.keywordNorm, "keyword-norm", "", "keyword normalisation for hybrid: max, mean, minmax, raw or clamp (default max)")
	fl.StringVar(&f.vectorNorm, "vector-norm", "", "cosine normalisation for hybrid: mean, max, minmax, raw or clamp (default mean)")
	fl.IntVar(&f.bootstrap, "bootstrap", 0, "resample the queries this many times (e.g. 1000, seeded: the same run gives the same figures) for each ranking metric's 95% interval (\"ci95\") and each mode's paired difference to --baseline (\"paired\"); 0: none")
	fl.BoolVar(&f.perQuery, "per-query", false, "with --json, add each query's figures (\"perQuery\": file, line, rank of the first relevant tool, noMatch, metrics), for tests of your own")
	fl.StringVar(&f.baseline, "baseline", "", "with --bootstrap and several modes, the mode the others are compared to, on the same queries (default hybrid)")
	g.addEmbedFlags(cmd)
	return cmd
}

// evalLine is one --json output line.
type evalLine struct {
	Dataset   string             `json:"dataset"`
	Mode      search.Mode        `json:"mode"`
	Tools     int                `json:"tools"`
	Queries   int                `json:"queries"`
	Metrics   search.Metrics     `json:"metrics"`
	LatencyMS map[string]float64 `json:"latencyMs"`
	Misses    []evalMiss         `json:"misses,omitempty"`
	// Thresholds are the abstain rates at each --thresholds value, each
	// {"minConfidence": 0.05, "false_abstain_rate": …, "abstainLostHit@1":
	// …, "abstain_rate": …}.
	Thresholds []search.MetricList `json:"thresholds,omitempty"`
	// CI95 and Paired are --bootstrap's: each ranking metric's 95%
	// interval, and the paired difference to --baseline's mode.
	CI95   search.Intervals `json:"ci95,omitempty"`
	Paired *evalPaired      `json:"paired,omitempty"`
	// PerQuery is --per-query's: each query's figures, in query order.
	PerQuery []evalQuery `json:"perQuery,omitempty"`
	// Run says what the figures came from, enough to reproduce them.
	Run *evalRun `json:"run"`
}

// evalQuery is one query's figures: the first relevant tool's rank in the
// top 10 (left out when none is there, and for a no-answer query), whether
// the answer was noMatch, and the metrics that average into the line's
// (a no-answer query's: abstain_rate, 0 or 1).
type evalQuery struct {
	File    string            `json:"file"`
	Line    int               `json:"line"`
	Rank    int               `json:"rank,omitempty"`
	NoMatch bool              `json:"noMatch"`
	Metrics search.MetricList `json:"metrics"`
}

type evalPaired struct {
	Baseline search.Mode  `json:"baseline"`
	Diff     search.Diffs `json:"diff"`
}

// evalRun is what a run's figures depend on besides the ranking code: the
// build, the model, the files (by SHA-256) and the settings in effect. Two
// runs of one evalRun give the same --json lines but for "latencyMs".
type evalRun struct {
	Toolgate string `json:"toolgate"`
	// Commit is the build's revision, "+dirty" when it had changes not
	// committed (buildCommit); "unknown" when the build does not know it,
	// and CommitUnknown says why.
	Commit        string `json:"commit,omitempty"`
	CommitUnknown string `json:"commitUnknown,omitempty"`
	Model         string `json:"model,omitempty"`
	// ModelSHA256 is the model file's whole sha256 (Model names its
	// first 12 hex digits).
	ModelSHA256 string `json:"modelSha256,omitempty"`
	ONNXRuntime string `json:"onnxruntime,omitempty"`
	// SHA256 holds each file's SHA-256 under its flag's name: tools,
	// queries, noAnswer, learnFrom.
	SHA256   map[string]string `json:"sha256"`
	Settings evalSettings      `json:"settings"`
	// Bootstrap is --bootstrap's replicates and seed.
	Bootstrap *evalBootstrap `json:"bootstrap,omitempty"`
}

type evalSettings struct {
	KeywordWeight float64 `json:"keywordWeight"`
	VectorWeight  float64 `json:"vectorWeight"`
	Candidates    int     `json:"candidates"`
	RRFK          float64 `json:"rrfK"`
	KeywordNorm   string  `json:"keywordNorm"`
	VectorNorm    string  `json:"vectorNorm"`
	StepWeight    float64 `json:"stepWeight"`
	MinConfidence float64 `json:"minConfidence"`
	// SearchedAt is the threshold the searches ran at (the largest of
	// minConfidence and --thresholds).
	SearchedAt   float64 `json:"searchedAt"`
	Depth        int     `json:"depth"`
	LimitQueries int     `json:"limitQueries,omitempty"`
	ExactNames   bool    `json:"exactNames,omitempty"`
}

type evalBootstrap struct {
	Replicates int `json:"replicates"`
	Seed       int `json:"seed"`
}

type evalMiss struct {
	// File is the queries file the query is on (--queries, or
	// --no-answer's), Line its line there.
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
	Rank     int      `json:"rank,omitempty"`
	Top      []string `json:"top"`
}

func runEval(ctx context.Context, g *globals, f *evalFlags, out io.Writer) error {
	log := g.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if f.queries != "" && f.exactNames {
		return usageError{errors.New("eval: --queries and --exact-names exclude each other: give --queries FILE to ask its queries, or --exact-names to ask for each tool by name")}
	}
	if f.tools == "" || f.queries == "" && !f.exactNames {
		return usageError{errors.New("eval needs --tools and either --queries or --exact-names (bench JSONL files, e.g. ../shared/bench/azure-mcp/tools.jsonl)")}
	}
	var modes []search.Mode
	if f.mode == "all" {
		modes = search.Modes
	} else {
		m, err := search.ParseMode(f.mode)
		if err != nil || m == "" {
			return usageError{fmt.Errorf("--mode %q: want hybrid, bm25, vector, rrf or all", f.mode)}
		}
		modes = []search.Mode{m}
	}
	kn, err := search.ParseNorm(f.keywordNorm)
	if err != nil {
		return usageError{fmt.Errorf("--keyword-norm: %w", err)}
	}
	vn, err := search.ParseNorm(f.vectorNorm)
	if err != nil {
		return usageError{fmt.Errorf("--vector-norm: %w", err)}
	}
	if f.perQuery && !f.json {
		return usageError{errors.New("--per-query adds each query's figures to the --json lines: give --json too")}
	}
	if f.bootstrap < 0 {
		return usageError{fmt.Errorf("--bootstrap %d: want 0 (none) or a number of resamples, e.g. 1000", f.bootstrap)}
	}
	if f.baseline != "" {
		m, err := search.ParseMode(f.baseline)
		if err != nil || m == "" || !slices.Contains(modes, m) {
			return usageError{fmt.Errorf("--baseline %q: want one of the modes run (--mode %s: %s)", f.baseline, f.mode, joinModes(modes))}
		}
	}
	if f.limitQueries < 0 {
		return usageError{fmt.Errorf("--limit-queries %d: want 0 (all) or more", f.limitQueries)}
	}
	// With --thresholds, every query is searched once at the largest
	// threshold asked for, and each threshold's report (the main table's
	// too) is read from those confidences (search.Report.At).
	// The config's range checks; a negative value is the flags' "off".
	if msg := config.CheckConfidence(f.minConfidence); msg != "" && !(f.minConfidence < 0) {
		return usageError{fmt.Errorf("--min-confidence %s (negative never answers noMatch; leave it out for the default)", msg)}
	}
	if msg := config.CheckWeight(f.stepWeight); msg != "" && !(f.stepWeight < 0) {
		return usageError{fmt.Errorf("--step-weight %s (negative ranks whole queries only; leave it out for the default)", msg)}
	}
	threshold := search.EffectiveMinConfidence(f.minConfidence)
	searchAt := threshold
	for _, t := range f.thresholds {
		if msg := config.CheckConfidence(t); msg != "" {
			return usageError{fmt.Errorf("--thresholds: %s", msg)}
		}
		searchAt = max(searchAt, t)
	}

	tools, err := catalog.ReadFile(f.tools)
	if err != nil {
		return swappedFiles(f, err)
	}
	if f.warnings != nil {
		catalog.Review(f.warnings, f.tools, tools)
	}
	var qs []search.BenchQuery
	if f.exactNames {
		qs = search.ExactNameQueries(tools)
	} else {
		if qs, err = search.LoadQueries(f.queries); err != nil {
			return swappedFiles(f, err)
		}
		if err := search.CheckQueries(tools, qs); err != nil {
			return usageError{err}
		}
	}
	if f.limitQueries > 0 && f.limitQueries < len(qs) {
		qs = qs[:f.limitQueries]
	}
	if f.noAnswer != "" {
		more, err := search.LoadQueries(f.noAnswer)
		if err != nil {
			return usageError{err}
		}
		if f.limitQueries > 0 && f.limitQueries < len(more) {
			more = more[:f.limitQueries]
		}
		for _, q := range more {
			// Its File and Line stay those of --no-answer's file: --misses
			// said "line 233" of a file of 2 lines.
			q.Relevant, q.RelevantGroups = []string{}, nil
			qs = append(qs, q)
		}
	}
	if n, first := search.Repeats(qs); n > 0 && f.warnings != nil {
		more := ""
		if n > len(first) {
			more = fmt.Sprintf(", and %d more", n-len(first))
		}
		fmt.Fprintf(f.warnings, "toolgate: warning: %s asked again, and each asking counts in the figures: %s%s: drop the repeats to count each query once\n",
			plural.Of(n, "query"), strings.Join(first, ", "), more)
	}
	dataset := f.dataset
	if dataset == "" {
		dataset = filepath.Base(filepath.Dir(f.tools))
		if abs, err := filepath.Abs(f.tools); err == nil {
			dataset = filepath.Base(filepath.Dir(abs))
		}
		if f.exactNames {
			dataset += " (exact names)"
		}
	}

	// A log that shares queries with qs, or names a tool the catalog lacks,
	// is refused before the model loads and the index is built, which take
	// seconds.
	var usage search.Usage
	if f.learnFrom != "" {
		store, err := learnFromLog(f.learnFrom, qs, tools)
		if err != nil {
			return err
		}
		defer store.Close()
		usage = store
	}

	// The embedder is needed by every mode but bm25. Without it bm25 still
	// runs and each other mode reports why it could not.
	var emb index.Embedder
	var embErr error
	needVectors := false
	for _, m := range modes {
		needVectors = needVectors || m != search.ModeBM25
	}
	if needVectors {
		var closer io.Closer
		// Loaded at the first text the cache lacks: a run whose vectors
		// are all cached loads no model (embed.Options.Lazy).
		// A cache that cannot be had (a gateway on the data folder holds
		// it, the folder is read-only) is one in memory for this run: the
		// latency figures are those of a search whose query vector is
		// cached, whoever holds the data folder's.
		emb, closer, embErr = g.openEmbedderCache(ctx, func(o *embed.Options) { o.Lazy = true },
			func(o *embed.CacheOptions) { o.InMemoryIfUnavailable = true })
		if embErr != nil {
			emb = nil
			if len(modes) == 1 {
				return fmt.Errorf("mode %s needs the embedding model: %w", modes[0], embErr)
			}
		} else if closer != nil {
			defer closer.Close()
		}
	}

	start := time.Now()
	prog := newIndexProgress(f.progress, "embedding", "tools", f.progress == nil)
	ix, err := index.Build(ctx, tools, emb, &index.Options{Logger: log, Progress: prog.update})
	prog.finish()
	if err != nil {
		return fmt.Errorf("build index: %w", err)
	}
	log.Info("index built", "tools", ix.Len(), "vectors", ix.HasVectors(), "took", time.Since(start).Round(time.Millisecond))
	if emb != nil {
		start = time.Now()
		prog := newIndexProgress(f.progress, "embedding", "queries", f.progress == nil)
		err := search.WarmQueries(ctx, emb, qs, prog.update)
		prog.finish()
		if err != nil {
			return err
		}
		log.Info("queries embedded", "queries", len(qs), "took", time.Since(start).Round(time.Millisecond))
	}
	// The engine's own mode is the one asked when one is: bm25 alone
	// needs no model, and is not warned of running without one.
	var engMode search.Mode
	if len(modes) == 1 {
		engMode = modes[0]
	}
	eng := search.New(ix, emb, &search.Options{Mode: engMode, Candidates: f.candidates, KeywordNorm: kn, VectorNorm: vn, MinConfidence: searchAt, StepWeight: f.stepWeight, Usage: usage, Logger: log})
	defer eng.Close()
	if usage != nil {
		if err := eng.RefreshLearned(ctx); err != nil {
			return fmt.Errorf("learn from %s: %w", f.learnFrom, err)
		}
		if f.dataset == "" {
			dataset += " (usage-tuned)"
		}
	}

	run, err := newEvalRun(f, ix, emb, eng.Options(), threshold)
	if err != nil {
		return err
	}
	var reports []search.Report
	var skipped []string
	// stopped is a stop (Ctrl-C) after a mode or more were done: their
	// figures are still written, the table's and --bootstrap's too, as
	// the stop's message says (a table of four modes stopped in its third
	// wrote none).
	var stopped error
	for _, m := range modes {
		if m != search.ModeBM25 && emb == nil {
			skipped = append(skipped, string(m))
			continue
		}
		prog := newIndexProgress(f.progress, "searching "+string(m), "queries", f.progress == nil)
		rep, err := search.Evaluate(ctx, &progressRanker{Ranker: eng, total: len(qs), update: prog.update}, qs, m)
		prog.finish()
		if err != nil && ctx.Err() != nil && len(reports) > 0 {
			stopped = fmt.Errorf("mode %s: %w", m, err)
			break
		}
		if err != nil {
			return fmt.Errorf("mode %s: %w", m, err)
		}
		rep = rep.At(threshold)
		reports = append(reports, rep)
		// Without --bootstrap each mode's line is written as it is done
		// (an interrupted run keeps them); with it, after the last mode,
		// which the paired differences need.
		if f.json && f.bootstrap == 0 {
			if err := writeEvalJSON(out, dataset, len(tools), len(qs), rep, f.misses, f.perQuery, f.thresholds, nil, run); err != nil {
				return err
			}
		}
		if f.modeDone != nil {
			f.modeDone(m)
		}
	}
	var cis []search.Intervals
	var diffs []search.Diffs
	base := -1
	if f.bootstrap > 0 {
		baseline := search.Mode(cmp.Or(f.baseline, string(search.ModeHybrid)))
		base = slices.IndexFunc(reports, func(r search.Report) bool { return r.Mode == baseline })
		cis, diffs = search.Bootstrap(reports, base, f.bootstrap)
	}
	if f.json && f.bootstrap > 0 {
		for i, rep := range reports {
			b := &evalBootstrapped{}
			if i < len(cis) {
				b.ci95 = cis[i]
			}
			if i < len(diffs) && diffs[i] != nil {
				b.paired = &evalPaired{Baseline: reports[base].Mode, Diff: diffs[i]}
			}
			if err := writeEvalJSON(out, dataset, len(tools), len(qs), rep, f.misses, f.perQuery, f.thresholds, b, run); err != nil {
				return err
			}
		}
	}
	if !f.json {
		writeEvalTable(out, dataset, len(tools), qs, reports)
		if len(f.thresholds) > 0 {
			for _, rep := range reports {
				writeThresholds(out, rep, f.thresholds)
			}
		}
		if f.misses {
			for _, rep := range reports {
				writeMisses(out, rep, f.queries)
			}
		}
		if len(cis) > 0 {
			writeBootstrap(out, reports, base, cis, diffs, f.bootstrap)
		}
	}
	if stopped != nil {
		return stopped
	}
	if len(skipped) > 0 {
		return fmt.Errorf("modes %s not run: they need the embedding model: %w", strings.Join(skipped, ", "), embErr)
	}
	return nil
}

// progressRanker counts a mode's searches for its progress line (a mode
// of --mode all took 20 to 60 s at 8,904 queries, with nothing shown).
type progressRanker struct {
	search.Ranker
	n, total int
	update   func(done, total int)
}

func (r *progressRanker) Search(ctx context.Context, q search.Query) (search.Result, error) {
	res, err := r.Ranker.Search(ctx, q)
	r.n++
	r.update(r.n, r.total)
	return res, err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// evalBootstrapped is a mode's --bootstrap figures.
type evalBootstrapped struct {
	ci95   search.Intervals
	paired *evalPaired
}

func writeEvalJSON(out io.Writer, dataset string, tools, queries int, rep search.Report, misses, perQuery bool, thresholds []float64, boot *evalBootstrapped, run *evalRun) error {
	line := evalLine{
		Dataset: dataset, Mode: rep.Mode, Tools: tools, Queries: queries,
		Metrics:   rep.Metrics,
		LatencyMS: map[string]float64{"p50": ms(rep.LatencyP50), "p95": ms(rep.LatencyP95)},
		Run:       run,
	}
	if boot != nil {
		line.CI95, line.Paired = boot.ci95, boot.paired
	}
	for _, t := range thresholds {
		line.Thresholds = append(line.Thresholds, append(search.MetricList{{Name: "minConfidence", Value: t}}, rep.At(t).Metrics.Abstains()...))
	}
	if perQuery {
		for _, q := range rep.PerQuery() {
			m := q.Metrics
			line.PerQuery = append(line.PerQuery, evalQuery{File: q.Query.File, Line: q.Query.Line, Rank: m.FirstRelevantRank, NoMatch: m.Abstained,
				Metrics: search.Average([]search.QueryMetrics{m}).Named()})
		}
	}
	if misses {
		line.Misses = []evalMiss{}
		for _, m := range rep.Misses {
			line.Misses = append(line.Misses, evalMiss{File: m.Query.File, Line: m.Query.Line, Query: m.Query.Query, Relevant: m.Query.Relevant, Rank: m.Rank, Top: m.Top})
		}
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

func writeEvalTable(out io.Writer, dataset string, tools int, qs []search.BenchQuery, reports []search.Report) {
	groups, noAnswer := false, 0
	for _, r := range reports {
		groups = groups || r.Metrics.GroupQueries > 0
	}
	for _, q := range qs {
		if q.NoAnswer() {
			noAnswer++
		}
	}
	if noAnswer > 0 {
		fmt.Fprintf(out, "dataset %s: %s, %s (%d answerable, %d no-answer)\n", dataset, plural.Of(tools, "tool"), plural.Of(len(qs), "query"), len(qs)-noAnswer, noAnswer)
	} else {
		fmt.Fprintf(out, "dataset %s: %s, %s\n", dataset, plural.Of(tools, "tool"), plural.Of(len(qs), "query"))
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "mode\tHit@1\tHit@5\tHit@10\tRecall@5\tRecall@10\tMRR@10\tnDCG@10\t"
	if groups {
		head += "GroupR@5\tGroupR@10\t"
	}
	head += "FalseAbst\t"
	if noAnswer > 0 {
		head += "Abstain\t"
	}
	fmt.Fprintln(tw, head+"p50 ms\tp95 ms\t")
	pct := func(x float64) string { return fmt.Sprintf("%.1f", 100*x) }
	for _, r := range reports {
		m := r.Metrics
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%.3f\t%s\t", r.Mode, pct(m.Hit1), pct(m.Hit5), pct(m.Hit10), pct(m.Recall5), pct(m.Recall10), m.MRR10, pct(m.NDCG10))
		if groups {
			row += pct(m.GroupRecall5) + "\t" + pct(m.GroupRecall10) + "\t"
		}
		row += pct(m.FalseAbstainRate) + "\t"
		if noAnswer > 0 {
			row += pct(m.AbstainRate) + "\t"
		}
		fmt.Fprintf(tw, "%s%.2f\t%.2f\t\n", row, ms(r.LatencyP50), ms(r.LatencyP95))
	}
	tw.Flush()
}

// writeBootstrap prints each mode's 95% intervals and, under them, each
// mode's paired difference to the baseline's (reports[base]).
func writeBootstrap(out io.Writer, reports []search.Report, base int, cis []search.Intervals, diffs []search.Diffs, replicates int) {
	fmt.Fprintf(out, "\n95%% intervals (bootstrap over the queries, %d resamples, seed %d)\n", replicates, search.BootstrapSeed)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "mode\t"
	for _, c := range cis[0] {
		head += c.Name + "\t"
	}
	fmt.Fprintln(tw, head)
	for i, rep := range reports {
		row := string(rep.Mode) + "\t"
		for _, c := range cis[i] {
			row += fmt.Sprintf("%s–%s\t", asInTable(c.Name, c.CI[0], false), asInTable(c.Name, c.CI[1], false))
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	if base < 0 || len(reports) < 2 {
		return
	}
	fmt.Fprintf(out, "\ndifference to %s on the same queries (percentage points, MRR as a fraction [95%% interval] paired-bootstrap p)\n", reports[base].Mode)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, head)
	for i, rep := range reports {
		if diffs[i] == nil {
			continue
		}
		row := string(rep.Mode) + "\t"
		for _, d := range diffs[i] {
			p := fmt.Sprintf("p %.3f", d.Diff.P)
			if d.Diff.P == 0 {
				p = fmt.Sprintf("p<%g", 1/float64(replicates))
			}
			row += fmt.Sprintf("%s [%s, %s] %s\t", asInTable(d.Name, d.Diff.Mean, true), asInTable(d.Name, d.Diff.CI95[0], true), asInTable(d.Name, d.Diff.CI95[1], true), p)
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
}

// asInTable is a metric's value as the table writes it: a percentage with
// one decimal, MRR a fraction with three; signed for a difference.
func asInTable(name string, v float64, signed bool) string {
	format, scale := "%.1f", 100.0
	if name == "mrr@10" {
		format, scale = "%.3f", 1
	}
	if signed {
		format = "%+" + format[1:]
	}
	return fmt.Sprintf(format, scale*v)
}

// writeThresholds prints rep's abstain rates at each threshold, from the
// same searches.
func writeThresholds(out io.Writer, rep search.Report, thresholds []float64) {
	fmt.Fprintf(out, "\n%s: abstain rates by minConfidence (one run, at %v)\n", rep.Mode, slices.Max(thresholds))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "minConfidence\t"
	for _, r := range rep.Metrics.Abstains() {
		head += r.Name + "\t"
	}
	fmt.Fprintln(tw, head)
	for _, t := range thresholds {
		row := strconv.FormatFloat(t, 'f', -1, 64) + "\t"
		for _, r := range rep.At(t).Metrics.Abstains() {
			row += fmt.Sprintf("%.1f\t", 100*r.Value)
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
}

func writeMisses(out io.Writer, rep search.Report, queries string) {
	fmt.Fprintf(out, "\n%s: %s with no relevant tool in the top 5 (or no-answer queries answered)\n", rep.Mode, plural.Of(len(rep.Misses), "query"))
	for _, m := range rep.Misses {
		where := fmt.Sprintf("line %d", m.Query.Line)
		if m.Query.File != queries {
			where = fmt.Sprintf("%s line %d", m.Query.File, m.Query.Line) // --no-answer's
		}
		if m.Query.NoAnswer() {
			fmt.Fprintf(out, "  %s: %q\n    want noMatch\n    got  %s\n", where, m.Query.Query, strings.Join(m.Top, ", "))
			continue
		}
		rank := "not in top 10"
		if m.Rank > 0 {
			rank = fmt.Sprintf("rank %d", m.Rank)
		}
		fmt.Fprintf(out, "  %s: %q\n    want %s (%s)\n    got  %s\n", where, m.Query.Query, strings.Join(m.Query.Relevant, ", "), rank, strings.Join(m.Top, ", "))
	}
}

// swappedFiles is err, the failure to read --tools or --queries, as a
// usage error (exit status 2, as a flag's wrong value: the file given is
// not what the flag takes), saying so when the two look given the wrong
// way round, since each file's own message (`queries.jsonl:1: missing
// "server"`) does not.
// A tools line has "server", "name" or "description"; a queries line has
// "query". The first non-blank line of each file decides.
func swappedFiles(f *evalFlags, err error) error {
	toolsKind, toolsWhy := benchLineKind(f.tools)
	var queriesKind, queriesWhy string
	if f.queries != "" {
		queriesKind, queriesWhy = benchLineKind(f.queries)
	}
	switch {
	case toolsKind == "queries" && queriesKind == "tools":
		return usageError{fmt.Errorf("--tools %s and --queries %s look swapped: the first is a queries file (%s), the second a tools file (%s); pass --tools %s --queries %s",
			f.tools, f.queries, toolsWhy, queriesWhy, f.queries, f.tools)}
	case toolsKind == "queries":
		return wrongBenchFile("--tools", f.tools, "tools", "are the files swapped?", err)
	case queriesKind == "tools":
		return wrongBenchFile("--queries", f.queries, "queries", "are the files swapped?", err)
	}
	return usageError{err}
}

// wrongBenchFile is err, the failure to read path given to flag, which
// takes a file of kind ("tools" or "queries"), as a usage error; it says
// so, with hint, when the file's first line is of the other kind (`index
// --tools queries.jsonl` read `queries.jsonl:1: missing "server"`).
func wrongBenchFile(flag, path, kind, hint string, err error) error {
	got, why := benchLineKind(path)
	if got == "" || got == kind {
		return usageError{err}
	}
	return usageError{fmt.Errorf("%s %s looks like a %s file (%s), not a %s file: %s (%w)", flag, path, got, why, kind, hint, err)}
}

// benchLineKind says whether the first non-blank line of a bench JSONL
// file is a query ("queries") or a tool ("tools"), and why; "" when it is
// neither or cannot be read.
func benchLineKind(path string) (kind, why string) {
	fh, err := os.Open(path)
	if err != nil {
		return "", ""
	}
	defer fh.Close()
	errFirst := errors.New("first line read")
	_ = catalog.EachLine(fh, path, func(line int, b []byte) error {
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) == nil {
			if _, ok := m["query"]; ok {
				kind, why = "queries", fmt.Sprintf(`line %d has "query"`, line)
			} else {
				for _, k := range []string{"server", "name", "description"} {
					if _, ok := m[k]; ok {
						kind, why = "tools", fmt.Sprintf(`line %d has %q`, line, k)
						break
					}
				}
			}
		}
		return errFirst
	})
	return kind, why
}

// learnFromLog loads a queries-format log into an in-memory learned-pairs
// store, every (query, relevant tool) pair recorded once. A log that
// shares a query with the evaluated ones is refused: a figure whose
// evaluation queries were also learned measures memory, not learning.
func learnFromLog(path string, eval []search.BenchQuery, tools []catalog.Tool) (*learn.Store, error) {
	logQs, err := search.LoadQueries(path)
	if err != nil {
		return nil, usageError{err}
	}
	// A pair of a tool the catalog lacks was learned, and taught nothing.
	if err := search.CheckQueries(tools, logQs); err != nil {
		return nil, usageError{err}
	}
	asked := make(map[string]bool, len(eval))
	for _, q := range eval {
		asked[search.QueryKey(q.Query)] = true
	}
	defs := make(map[string]catalog.Tool, len(tools))
	for _, t := range tools {
		defs[t.ID()] = t
	}
	var pairs []learn.Pair
	shared := 0
	for _, q := range logQs {
		if asked[search.QueryKey(q.Query)] {
			shared++
			continue
		}
		for _, id := range q.Relevant {
			pairs = append(pairs, learn.Pair{Query: q.Query, Tool: id})
		}
	}
	if shared > 0 {
		return nil, usageError{fmt.Errorf("--learn-from %s shares %d queries with --queries: learn from one half of a query set and evaluate the other (scripts/split-queries.py)", path, shared)}
	}
	store, err := learn.Open("", &learn.Options{InMemory: true})
	if err != nil {
		return nil, err
	}
	if err := store.Add(pairs, defs); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

// newEvalRun is the run's evalRun: the files' SHA-256 are read anew
// (cheap next to the evaluation).
func newEvalRun(f *evalFlags, ix *index.Index, emb index.Embedder, o search.Options, threshold float64) (*evalRun, error) {
	run := &evalRun{Toolgate: version, Model: ix.ModelID(), SHA256: map[string]string{},
		Settings: evalSettings{
			KeywordWeight: o.KeywordWeight, VectorWeight: o.VectorWeight, Candidates: o.Candidates, RRFK: o.RRFK,
			KeywordNorm: string(o.KeywordNorm), VectorNorm: string(o.VectorNorm), StepWeight: o.StepWeight,
			MinConfidence: threshold, SearchedAt: o.MinConfidence, Depth: search.EvalDepth,
			LimitQueries: f.limitQueries, ExactNames: f.exactNames,
		}}
	run.Commit, run.CommitUnknown = buildCommit()
	if run.Model != "" {
		run.ONNXRuntime = embed.ORTVersion
		if m, ok := emb.(interface{ ModelSHA256() string }); ok {
			run.ModelSHA256 = m.ModelSHA256()
		}
	}
	if f.bootstrap > 0 {
		run.Bootstrap = &evalBootstrap{Replicates: f.bootstrap, Seed: search.BootstrapSeed}
	}
	for _, file := range []struct{ key, path string }{{"tools", f.tools}, {"queries", f.queries}, {"noAnswer", f.noAnswer}, {"learnFrom", f.learnFrom}} {
		if file.path == "" {
			continue
		}
		sum, err := models.FileSHA256(file.path)
		if err != nil {
			return nil, err
		}
		run.SHA256[file.key] = sum
	}
	return run, nil
}

// commit is the revision make build stamps (-ldflags "-X
// main.commit=..."; the Makefile's COMMIT): what buildCommit falls back on
// when the build has no VCS stamp of Go's own (-buildvcs=false).
var commit string

// buildCommit is the binary's commit (commitOf).
func buildCommit() (string, string) {
	info, _ := debug.ReadBuildInfo()
	return commitOf(info, commit)
}

// commitOf is the commit a build of info was made from: its VCS revision,
// "+dirty" when built with changes not committed; else stamped (the
// revision make build stamps); else "unknown", and why.
func commitOf(info *debug.BuildInfo, stamped string) (commit, why string) {
	var rev, dirty string
	if info != nil {
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			}
		}
	}
	switch {
	case rev != "":
		return rev + dirty, ""
	case stamped != "":
		return stamped, ""
	}
	return "unknown", "built without VCS information (go build -buildvcs=false, GOFLAGS=-buildvcs=false, go run, or outside a git checkout) and without the revision make build stamps (-ldflags -X main.commit=…): build with make build"
}

// joinModes is modes joined with ", ".
func joinModes(modes []search.Mode) string {
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}
