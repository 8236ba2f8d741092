// Package search owns ranking: it turns a natural-language query into a
// ranked list of catalog tools with a score breakdown (keyword, vector,
// fused score). It fuses the index's BM25 and cosine signals (hybrid, the
// default, or reciprocal rank fusion), degrades to BM25 when no embedder or
// no vectors are available, and holds the relevance metrics and the bench
// loader that `toolgate eval` and the ranking golden test use.
//
// An Engine holds the current index behind an atomic pointer: a re-index
// swaps a new one in without making searches wait, and the old one is closed
// once the last search using it returns.
package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
)

// Mode selects how the keyword and vector signals are combined.
type Mode string

const (
	// ModeHybrid is a weighted sum of the normalised keyword score and the
	// cosine: score = KeywordWeight·keyword + VectorWeight·cosine.
	ModeHybrid Mode = "hybrid"
	// ModeBM25 ranks by the BM25 score alone. It is also the effective mode
	// when vectors are unavailable (degraded).
	ModeBM25 Mode = "bm25"
	// ModeVector ranks by cosine similarity alone.
	ModeVector Mode = "vector"
	// ModeRRF is reciprocal rank fusion of the two rankings (Cormack et al.
	// 2009), kept for comparison with the weighted sum.
	ModeRRF Mode = "rrf"
)

// Modes lists every mode, in the order eval reports them.
var Modes = []Mode{ModeBM25, ModeVector, ModeHybrid, ModeRRF}

// ParseMode checks a mode name; "" is the engine default.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "", ModeHybrid, ModeBM25, ModeVector, ModeRRF:
		return m, nil
	}
	return "", fmt.Errorf("unknown search mode %q: want hybrid, bm25, vector or rrf", s)
}

// NeedsVectors reports whether the mode uses the vector signal ("" is
// hybrid's).
func (m Mode) NeedsVectors() bool { return m != ModeBM25 }

// DefaultLimit is the number of hits of a Query that sets no Limit. The
// engine puts no upper bound on Limit: its caller does (search_tools' bounds
// are gateway.DefaultLimit and gateway.MaxLimit).
const DefaultLimit = 5

// Defaults for Options.
const (
	DefaultKeywordWeight = 0.3
	DefaultVectorWeight  = 0.7
	DefaultCandidates    = 100
	DefaultRRFK          = 60
)

// ErrEmptyQuery is returned for an empty or whitespace-only query. The
// gateway turns it into an isError result, so its text tells a model what to
// send instead.
var ErrEmptyQuery = errors.New(`empty query: send a few words describing the tool you need, e.g. "list files in a directory"`)

// Options configure an Engine. A nil *Options means all defaults; zero
// fields take their default.
type Options struct {
	// Mode is used when a Query does not name one. Default ModeHybrid.
	Mode Mode
	// KeywordWeight and VectorWeight weigh the two signals in ModeHybrid.
	// When both are zero the defaults 0.3 and 0.7 apply; otherwise they are
	// used as given (negative values count as zero).
	KeywordWeight, VectorWeight float64
	// Candidates is how many of the top hits of each signal form the
	// candidate pool that hybrid and RRF rank. Default 100.
	Candidates int
	// RRFK is the k constant of reciprocal rank fusion. Default 60.
	RRFK float64
	// KeywordNorm and VectorNorm say how each signal is mapped to [0,1]
	// before the weighted sum. Defaults: NormMax for the keyword score (the
	// query's best BM25 becomes 1) and NormMean for the cosine (the catalog's
	// mean cosine becomes 0, the best 1). Both signals then span one scale,
	// so the weights mean what they say; raw MiniLM cosines sit between a
	// query-dependent floor around 0.1–0.3 and a top around 0.5–0.7, which
	// let BM25 dominate. Measurements are in fusion.go.
	KeywordNorm, VectorNorm Norm
	// StepWeight weighs the ranking of each part of a query of several
	// steps against the whole query's in ModeHybrid (steps.go). Default
	// DefaultStepWeight; negative: whole queries only.
	StepWeight float64
	// MinConfidence is the confidence (see confidence.go) the best hit
	// needs for the answer not to be NoMatch. Default
	// DefaultMinConfidence; negative: never NoMatch.
	MinConfidence float64
	// Usage, when set, supplies the learned (query, tool) pairs the
	// ranking learns from (see learned.go); nil ranks zero-shot.
	Usage Usage
	// Logger receives degraded-mode notices; nil discards.
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Mode == "" {
		out.Mode = ModeHybrid
	}
	if out.KeywordWeight == 0 && out.VectorWeight == 0 {
		out.KeywordWeight, out.VectorWeight = DefaultKeywordWeight, DefaultVectorWeight
	}
	out.KeywordWeight = max(out.KeywordWeight, 0)
	out.VectorWeight = max(out.VectorWeight, 0)
	if out.Candidates <= 0 {
		out.Candidates = DefaultCandidates
	}
	if out.RRFK <= 0 {
		out.RRFK = DefaultRRFK
	}
	if out.KeywordNorm == "" {
		out.KeywordNorm = NormMax
	}
	if out.VectorNorm == "" {
		out.VectorNorm = NormMean
	}
	if out.StepWeight == 0 {
		out.StepWeight = DefaultStepWeight
	}
	out.MinConfidence = EffectiveMinConfidence(out.MinConfidence)
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// Query is one search request.
type Query struct {
	Text string
	// Limit is the number of hits wanted: 0 means DefaultLimit. It is not
	// clamped; the catalog's size bounds the answer.
	Limit int
	// Server, when set, restricts hits to that backend's tools.
	Server string
	// Filter, when set, restricts hits to the tools it lets through (a
	// caller's scope: see gateway/policy). The hits are the best of those
	// tools, ranked as the whole catalog ranks them, with the catalog
	// searched being the tools it lets through (NormMean's mean cosine is
	// theirs, as with Server). A filter that keeps every tool gives the
	// same hits as none, bit for bit.
	Filter *Filter
	// Keep, when set, drops the ranked tools it does not accept from the
	// hits (search_tools' readOnly): unlike Filter it does not change the
	// ranking, so fewer than Limit may come back. NoMatch and the
	// confidences the query's parts raise are those of the tools kept: a
	// tool dropped fits the query for no one who asked.
	Keep func(catalog.Tool) bool
	// Mode overrides the engine's default mode when set.
	Mode Mode
}

// Filter restricts a Query to some tools (index.Filter: evaluated once per
// index, applied inside both signals).
type Filter = index.Filter

// NewFilter returns the filter that lets through the tools keep accepts.
func NewFilter(keep func(catalog.Tool) bool) *Filter { return index.NewFilter(keep) }

// Hit is one ranked tool with its score breakdown. In hybrid mode
// Score = KeywordWeight·Keyword + VectorWeight·Vector exactly (times
// Options.StepWeight for a hit a part of the query ranked: see Clause).
type Hit struct {
	Tool catalog.Tool
	// Score is what the hits are sorted by (see Mode for its meaning).
	Score float64
	// Keyword is the BM25 score normalised per query to [0,1]: divided by
	// the query's best BM25 score (0 when the tool matches no query term).
	Keyword float64
	// Vector is the cosine normalised per query to [0,1]: how far it is
	// above the mean cosine of the catalog searched, as a fraction of the
	// best's distance (0 at or below the mean, 1 for the best; 0 when
	// vectors are unavailable).
	Vector float64
	// BM25 and Cosine are the raw signals before normalisation.
	BM25, Cosine float64
	// Coverage is the share of the query's terms (weighted by IDF) that
	// the tool's text holds, in [0,1].
	Coverage float64
	// Confidence is an absolute estimate, in [0,1], that the tool is what
	// the query asks for (calibrated from Cosine and Coverage; see
	// confidence.go). Unlike Score it does not depend on the other tools.
	Confidence float64
	// Exact says the query names this tool (its name or server__tool ID):
	// exact hits come first, whatever their scores.
	Exact bool
	// Fits says that Confidence reaches Options.MinConfidence (always,
	// when it is negative): a hit that does not is one of the closest
	// tools, not one that does what the query asks. NoMatch says no hit
	// fits.
	Fits bool
	// Clause, when set, is the part of a query of several steps that
	// ranked the tool (steps.go): Score, Keyword, Vector, BM25 and Cosine
	// are then that part's, and Score is StepWeight times its fused score.
	Clause string
}

// Result is the answer to a Query.
type Result struct {
	Hits []Hit
	// Mode is the mode actually used: ModeBM25 when vectors are
	// unavailable, whatever was asked.
	Mode Mode
	// Known is the share of the query's terms (IDF-weighted) that any tool
	// of the catalog searched holds.
	Known float64
	// NoMatch says that no hit reaches Options.MinConfidence: nothing in
	// the catalog fits the query, and the hits are only the closest.
	NoMatch bool
}

// Engine ranks tools from the current index. It is safe for concurrent use.
type Engine struct {
	cur      atomic.Pointer[snapshot]
	emb      index.Embedder
	opts     atomic.Pointer[Options] // after defaults; Reconfigure replaces them
	log      *slog.Logger
	degraded atomic.Bool // last reported; the log says it once per change
	// embedErr is the last query embedding's error ("" after a success):
	// the log says each new one once, not at every search (a model that
	// is not installed yet, or failed to load, fails them all).
	embedErr atomic.Pointer[string]

	// The learned model of the current index and pairs, rebuilt off the
	// search path by one goroutine at a time (see refreshLearned).
	learned   atomic.Pointer[learnedModel]
	refreshMu sync.Mutex
	// refreshDone is closed when the running rebuild ends (nil: none
	// runs); refreshErr is how the last one ended.
	refreshDone chan struct{}
	refreshErr  error
	refreshWG   sync.WaitGroup
	// builtAt and buildTook are when the last rebuild ended and how long
	// it took (written by the rebuilding goroutine, one at a time; see
	// waitRebuild). Under refreshMu: urgent counts the RefreshLearned
	// calls waiting, and closing waiting (non-nil while a rebuild waits
	// for its turn) starts that rebuild.
	builtAt   time.Time
	buildTook time.Duration
	urgent    int
	waiting   chan struct{}
	// firstWait is the index whose first searches wait for its learned
	// model, and until when (see learnedFor).
	firstWait  atomic.Pointer[firstWait]
	stop       context.Context
	stopCancel context.CancelFunc

	// slots bounds the searches that run at once (searchSlots); the
	// others wait their turn, first come first served, holding nothing
	// of the index yet. queued counts those waiting.
	slots  chan struct{}
	queued atomic.Int64
}

// searchSlots is how many searches run at once: the cores, and at least
// two, so that one search's keyword half and ranking run while another's
// query is embedded. More would not search faster (serve embeds on one
// ONNX Runtime session, one query after another), but each search holds
// the keyword half's scores of every tool (16 bytes a tool) from its
// start until its query is embedded: 256 HTTP clients searching a
// 10,000-tool gateway at once held 48 MiB of them, waiting for the
// session (toolgate-bench --sections team).
func searchSlots() int { return max(2, runtime.GOMAXPROCS(0)) }

// New returns an Engine over ix (which it now owns and closes). emb embeds
// queries; nil means BM25 only (degraded).
func New(ix *index.Index, emb index.Embedder, opts *Options) *Engine {
	o := opts.checked()
	e := &Engine{emb: emb, log: o.Logger, slots: make(chan struct{}, searchSlots())}
	e.opts.Store(&o)
	e.stop, e.stopCancel = context.WithCancel(context.Background())
	e.cur.Store(newSnapshot(ix))
	e.reportDegraded()
	e.learnAhead(ix)
	return e
}

// checked is withDefaults, with what cannot be used replaced by its
// default and said.
func (o *Options) checked() Options {
	out := o.withDefaults()
	if m, err := ParseMode(string(out.Mode)); err != nil || m == "" {
		out.Logger.Warn("unknown default search mode; using hybrid", "mode", out.Mode)
		out.Mode = ModeHybrid
	}
	if _, err := ParseNorm(string(out.KeywordNorm)); err != nil {
		out.Logger.Warn("unknown keyword normalisation; using max", "norm", out.KeywordNorm)
		out.KeywordNorm = NormMax
	}
	if _, err := ParseNorm(string(out.VectorNorm)); err != nil {
		out.Logger.Warn("unknown vector normalisation; using mean", "norm", out.VectorNorm)
		out.VectorNorm = NormMean
	}
	return out
}

// Reconfigure makes opts the engine's options from the next search on (a
// config reload): the mode, the weights, the confidence and step settings.
// Usage and Logger stay the engine's. Searches running finish with the
// options they started with, or some of each. From bm25 to a mode that
// reads vectors, the learned model is rebuilt with the learned queries'
// vectors (in the background: searches meanwhile use it without them).
func (e *Engine) Reconfigure(opts *Options) {
	cur := e.options()
	o := *opts
	o.Usage, o.Logger = cur.Usage, cur.Logger
	o = o.checked()
	e.opts.Store(&o)
	if !cur.Mode.NeedsVectors() && o.Mode.NeedsVectors() && o.Usage != nil {
		e.startRefresh()
	}
}

// options are the engine's options now.
func (e *Engine) options() *Options { return e.opts.Load() }

// reportDegraded logs when the vector half turns off or back on, once per
// change rather than at every swap. An engine whose mode is bm25 needs no
// vectors: it is not degraded without them, as State says (toolgate eval
// --mode bm25 warned "search runs BM25 only" of the mode it was asked).
func (e *Engine) reportDegraded() {
	degraded, why := e.Degraded()
	degraded = degraded && e.options().Mode.NeedsVectors()
	if e.degraded.Swap(degraded) == degraded {
		return
	}
	if degraded {
		e.log.Warn("search runs BM25 only", "reason", why)
	} else {
		e.log.Info("search runs with vectors", "mode", e.options().Mode)
	}
}

// noteEmbed notes how a query's embedding went (err nil: it worked),
// logging a failure when it differs from the last one and the first
// success after failures.
func (e *Engine) noteEmbed(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if last := e.embedErr.Load(); (last == nil && msg == "") || (last != nil && *last == msg) {
		return
	}
	last := e.embedErr.Swap(&msg)
	switch {
	case last != nil && *last == msg:
	case err != nil:
		e.log.Warn("embed query failed; answering with BM25 only (said once until it changes or works)", "err", err)
	case last != nil:
		e.log.Info("query embedding works again: answering with vectors")
	}
}

// Options returns the engine's options after defaults.
func (e *Engine) Options() Options { return *e.options() }

// Swap makes ix the index searches use. Searches running on the old index
// finish on it; it is closed when the last of them returns. Searches never
// wait for a swap.
func (e *Engine) Swap(ix *index.Index) {
	old := e.cur.Swap(newSnapshot(ix))
	if old != nil {
		old.release(e.log)
	}
	e.reportDegraded()
	e.learnAhead(ix)
}

// Borrow returns the index searches use now, held open until release is
// called (a Swap meanwhile closes it only then); nil when there is none.
func (e *Engine) Borrow() (ix *index.Index, release func()) {
	s := e.acquire()
	if s == nil {
		return nil, func() {}
	}
	return s.ix, func() { s.release(e.log) }
}

// Close releases the current index; it is closed once running searches
// return. The Engine must not be used afterwards.
func (e *Engine) Close() error {
	e.stopCancel()
	e.refreshWG.Wait()
	if old := e.cur.Swap(nil); old != nil {
		old.release(e.log)
	}
	return nil
}

// Degraded reports whether the vector half is off, and why.
func (e *Engine) Degraded() (bool, string) {
	if e.emb == nil {
		return true, "no embedder: the embedding model or its runtime is not available"
	}
	s := e.acquire()
	if s == nil {
		return true, "engine closed"
	}
	defer s.release(e.log)
	if s.ix != nil && s.ix.Len() > 0 && !s.ix.HasVectors() {
		return true, "the index was built without vectors"
	}
	return false, ""
}

// State is how the engine ranks now, for GET /status's "search" section.
type State struct {
	// Mode is the mode a query that names none is ranked in now:
	// Configured, or ModeBM25 while the vector half is off.
	Mode Mode `json:"mode"`
	// Configured is the default mode of the engine's options
	// (toolgate.search.mode).
	Configured Mode `json:"configuredMode"`
	// Model is the embedding model's ID while vectors rank.
	Model string `json:"model,omitempty"`
	// BM25Only says that ranking runs without its vectors although the
	// configured mode needs them; Reason says why, and how to fix it when
	// the embedder says so.
	BM25Only bool   `json:"bm25Only,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Running counts the searches ranking now, at most Slots of them
	// (Engine.Search bounds them); Waiting those waiting for a slot, first
	// come first served. Waiting above 0 for long says the gateway gets
	// more searches than it ranks: each waits about Waiting/Slots
	// searches' time on top of its own.
	Running int `json:"running"`
	Waiting int `json:"waiting"`
	Slots   int `json:"slots"`
}

// State says how the engine ranks a query that names no mode now, and
// why it runs without vectors when it does: the embedder's own load
// error (a model not installed yet names the command that installs it)
// rather than its consequence, and a query embedding that failed last.
func (e *Engine) State() State {
	mode := e.options().Mode
	st := State{Mode: mode, Configured: mode, Running: len(e.slots), Waiting: int(e.queued.Load()), Slots: cap(e.slots)}
	if !st.Configured.NeedsVectors() {
		return st
	}
	// A model that failed to load is BM25 even over an index with vectors
	// (a warm start after the model's files were removed or cut short):
	// no query can be embedded, though no search has said so yet.
	var loadErr error
	if l, ok := e.emb.(interface{ LoadError() error }); ok {
		loadErr = l.LoadError()
	}
	if degraded, why := e.Degraded(); degraded || loadErr != nil {
		if loadErr != nil {
			why = loadErr.Error()
		}
		st.Mode, st.BM25Only, st.Reason = ModeBM25, true, why
		return st
	}
	if last := e.embedErr.Load(); last != nil && *last != "" {
		st.Mode, st.BM25Only, st.Reason = ModeBM25, true, "embedding the last query failed: "+*last
		return st
	}
	st.Model = e.emb.ModelID()
	return st
}

// Tool looks a tool up by its namespaced ID in the current index.
func (e *Engine) Tool(id string) (catalog.Tool, bool) {
	s := e.acquire()
	if s == nil || s.ix == nil {
		return catalog.Tool{}, false
	}
	defer s.release(e.log)
	return s.ix.Tool(id)
}

// IDs returns every tool ID in the current index (in the index's order).
func (e *Engine) IDs() []string {
	s := e.acquire()
	if s == nil || s.ix == nil {
		return nil
	}
	defer s.release(e.log)
	return s.ix.IDs()
}

// limit is the number of hits q asks for: DefaultLimit when unset.
func (q Query) limit() int {
	if q.Limit <= 0 {
		return DefaultLimit
	}
	return q.Limit
}

// MaxQueryBytes bounds the text a query is ranked by: its first 4 KB (cut
// at a character's start). The model reads the first 128 tokens of it
// anyway (about 500 bytes of English), and the keyword search's cost grows
// with the terms: a query of 677 KB took 0.66 s of a CPU. An agent's
// request is a sentence or a few.
const MaxQueryBytes = 4096

// Search ranks the tools for q.
func (e *Engine) Search(ctx context.Context, q Query) (Result, error) {
	text := strings.TrimSpace(q.Text)
	if text == "" {
		return Result{}, ErrEmptyQuery
	}
	if len(text) > MaxQueryBytes {
		i := MaxQueryBytes
		for i > 0 && !utf8.RuneStart(text[i]) {
			i--
		}
		text = text[:i]
	}
	mode, err := ParseMode(string(q.Mode))
	if err != nil {
		return Result{}, err
	}
	if mode == "" {
		mode = e.options().Mode
	}
	limit := q.limit()

	e.queued.Add(1)
	select {
	case e.slots <- struct{}{}:
		e.queued.Add(-1)
	case <-ctx.Done():
		e.queued.Add(-1)
		return Result{}, ctx.Err()
	}
	defer func() { <-e.slots }()

	s := e.acquire()
	if s == nil {
		return Result{}, errors.New("search engine is closed")
	}
	defer s.release(e.log)
	ix := s.ix
	if ix == nil || ix.Len() == 0 {
		return Result{Mode: mode, NoMatch: e.noMatch(nil)}, nil
	}
	sub := ix.In(q.Filter)
	if sub.Filtered() && sub.Len("") == 0 {
		return Result{Mode: mode, NoMatch: e.noMatch(nil)}, nil
	}

	// Each stage is a span when the caller's span records (tracing on);
	// otherwise st costs nothing.
	st := stagesOf(ctx)

	// Both signals rank the query with what its paths are (paths.go).
	asked, toEmbed := queryTexts(text)

	// The query embedding (a MiniLM run, ~10 ms) and the keyword search run
	// side by side: on two or more cores the keyword half comes for free.
	type embedded struct {
		vec []float32
		err error
	}
	var embc chan embedded
	if mode.NeedsVectors() {
		if e.emb == nil || !ix.HasVectors() {
			mode = ModeBM25
		} else {
			embc = make(chan embedded, 1)
			go func() {
				ectx, span := st.start(ctx, stageEmbed)
				vecs, err := index.EmbedQueries(ectx, e.emb, []string{index.QueryPrefix(e.emb) + toEmbed})
				span.End()
				if err == nil && len(vecs) != 1 {
					err = fmt.Errorf("embedder returned %d vectors for 1 text", len(vecs))
				}
				if err != nil {
					embc <- embedded{err: err}
					return
				}
				embc <- embedded{vec: vecs[0]}
			}()
		}
	}

	// A query that asks for several things ("… and then …") is also
	// ranked clause by clause (see steps.go); the clauses are embedded
	// beside the whole query, in one batch of their own. allParts serve
	// the confidence too (parts.go); parts are those the steps rank.
	var allParts, parts []string
	var partc chan partVectors
	if embc != nil {
		allParts = QueryParts(text)
	}
	if embc != nil && mode == ModeHybrid && e.options().StepWeight > 0 {
		if len(allParts) >= minStepParts {
			parts = allParts
			partc = make(chan partVectors, 1)
			go func() {
				vecs, err := e.embedParts(ctx, st, parts)
				partc <- partVectors{vecs, err}
			}()
			defer func() {
				if partc != nil {
					<-partc // the goroutine never outlives Search
				}
			}()
		}
	}

	// The keyword half scores every tool at once (BM25F over the index's
	// postings); the vector half is fetched only to its top hits, as deep
	// as the candidate pool (the ranking never looks past it), and the few
	// keyword candidates its top misses get their exact cosine (a dot
	// product). The vector scan adds up every cosine on the way for
	// NormMean's catalog mean. Hits are those the whole catalog's lists
	// would give, bit for bit (TestPrunedMatchesWhole).
	kwDepth, vecDepth := e.depths(mode, limit, ix.Len(), embc != nil)
	lm := e.learnedFor(ctx, ix)
	var extra *index.ExtraField
	if lm != nil {
		extra = lm.extra
	}
	_, span := st.start(ctx, stageKeyword)
	kwRes, kwErr := sub.KeywordAll(asked, q.Server, extra)
	var kw signal
	if kwErr == nil {
		kw = keywordSignal(kwRes, kwDepth)
	}
	span.End()
	// The parts' keyword halves too, while the embeddings run.
	var partKW []*index.KeywordResult
	for _, p := range parts {
		if kwErr != nil {
			break
		}
		r, err := sub.KeywordAll(p, q.Server, extra)
		if err != nil {
			kwErr = err
			break
		}
		partKW = append(partKW, r)
	}
	var qvec []float32
	if embc != nil {
		r := <-embc // always sent: the goroutine never outlives Search
		switch {
		case ctx.Err() != nil:
			return Result{}, ctx.Err()
		case r.err != nil:
			e.noteEmbed(r.err)
			mode = ModeBM25
		default:
			e.noteEmbed(nil)
			qvec = r.vec
		}
	}
	if kwErr != nil {
		return Result{}, fmt.Errorf("keyword search: %w", kwErr)
	}
	var vec signal
	qorig := qvec
	if qvec != nil {
		_, span := st.start(ctx, stageVector)
		qvec = lm.query(qvec)
		vec = e.vectorSignal(lm, sub, qvec, vecDepth, q.Server, &kw)
		span.End()
	}
	_, span = st.start(ctx, stageFuse)
	if qvec != nil {
		e.fillMissing(ix, lm, kwRes, qvec, mode, &kw, &vec)
	}
	exact := s.names.get(ix).match(text)
	var exactIDs []string
	for _, row := range exact {
		t := ix.Tools()[row]
		if q.Server != "" && t.Server != q.Server || !sub.Has(t.ID()) {
			continue
		}
		id := t.ID()
		exactIDs = append(exactIDs, id)
		if b, ok := kwRes.Score(id); ok {
			if kw.extra == nil {
				kw.extra = make(map[string]float64)
			}
			kw.extra[id] = b
		}
		if qvec != nil {
			if c, ok := lm.cosine(ix, qvec, id); ok {
				if vec.extra == nil {
					vec.extra = make(map[string]float64)
				}
				vec.extra[id] = c
			}
		}
	}
	ranked := e.rankExact(mode, kw, vec, limit, exactIDs)
	span.End()

	var partVecs [][]float32
	partsEmbedded := false // the parts' embedding was tried, for the steps
	if partc != nil && mode == ModeHybrid {
		partsEmbedded = true
		pv := <-partc
		partc = nil
		switch {
		case ctx.Err() != nil:
			return Result{}, ctx.Err()
		case pv.err != nil:
			e.log.Warn("embed query parts failed; ranking the whole query only", "err", pv.err)
		default:
			partVecs = pv.vecs
			_, span := st.start(ctx, stageSteps)
			ranked = e.rankSteps(ix, sub, lm, q.Server, mode, limit, kwDepth, vecDepth, ranked, parts, partKW, partVecs)
			span.End()
		}
	}

	hits := make([]Hit, 0, len(ranked))
	cosines := make([]float64, 0, len(ranked))
	for _, r := range ranked {
		t, ok := ix.Tool(r.id)
		if !ok || q.Keep != nil && !q.Keep(t) {
			continue
		}
		h := Hit{Tool: t, Score: r.score, Keyword: r.keyword, Vector: r.vector, BM25: r.bm25, Cosine: r.cosine, Exact: r.exact, Coverage: kwRes.Coverage(r.id), Clause: r.clause}
		// Confidence was calibrated on the query as written: its cosine
		// with the tool's (learned) vector, not the shifted query's.
		var c float64
		if qorig != nil {
			c, _ = lm.confCosine(ix, qorig, r.id)
		}
		h.Confidence = confidence(c, h.Coverage, qorig != nil, h.Exact)
		hits = append(hits, h)
		cosines = append(cosines, c)
	}
	if partVecs != nil {
		raiseConfidence(ix, lm, hits, cosines, partVecs)
	}
	res := Result{Hits: hits, Mode: mode, Known: kwRes.Known()}
	res.NoMatch = e.noMatch(hits)
	if res.NoMatch && qorig != nil && !partsEmbedded && len(allParts) > 0 {
		// The query's parts can only raise a confidence, so unless they
		// were embedded for the steps above, they are embedded only when
		// the whole query leaves every hit short of the threshold (see
		// parts.go): a query that passes costs no extra embedding, and its
		// hits' confidences are those of the whole query.
		vecs, err := e.embedParts(ctx, st, allParts)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("embed query parts failed; confidence from the whole query", "err", err)
			}
		} else {
			raiseConfidence(ix, lm, hits, cosines, vecs)
			res.NoMatch = e.noMatch(hits)
		}
	}
	promoteReplacements(res.Hits)
	return res, nil
}

// noMatch marks the hits that reach Options.MinConfidence (Hit.Fits;
// every hit, when it is negative) and says that none does (never, when
// it is negative).
func (e *Engine) noMatch(hits []Hit) bool {
	threshold := e.options().MinConfidence
	none := threshold >= 0
	for i := range hits {
		hits[i].Fits = threshold < 0 || hits[i].Confidence >= threshold
		none = none && !hits[i].Fits
	}
	return none
}

// partVectors is the embedding of a query's parts.
type partVectors struct {
	vecs [][]float32
	err  error
}

// embedParts embeds a query's parts (QueryParts), each as a query of its
// own (with the query prefix), in one batch.
func (e *Engine) embedParts(ctx context.Context, st stages, parts []string) ([][]float32, error) {
	prefix := index.QueryPrefix(e.emb)
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = prefix + p
	}
	ectx, span := st.start(ctx, stageParts)
	vecs, err := index.EmbedQueries(ectx, e.emb, texts)
	span.End()
	if err == nil && len(vecs) != len(texts) {
		err = fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(texts))
	}
	return vecs, err
}

// raiseConfidence raises each hit's confidence to that of the query part
// (vecs) whose cosine with the tool is highest, when one is higher than
// the whole query's (cosines, by hit).
func raiseConfidence(ix *index.Index, lm *learnedModel, hits []Hit, cosines []float64, vecs [][]float32) {
	for i := range hits {
		h := &hits[i]
		if h.Exact {
			continue
		}
		best := cosines[i]
		for _, v := range vecs {
			if c, ok := lm.confCosine(ix, v, h.Tool.ID()); ok && c > best {
				best = c
			}
		}
		h.Confidence = max(h.Confidence, confidence(best, h.Coverage, true, false))
	}
}

// depths is how deep each signal's top is read: the candidate pool in the
// fused modes, the limit otherwise, and every keyword score when NormMean
// needs the keyword mean.
func (e *Engine) depths(mode Mode, limit, n int, vectors bool) (kwDepth, vecDepth int) {
	pool := max(e.options().Candidates, limit)
	kwDepth, vecDepth = limit, limit
	if mode == ModeHybrid || mode == ModeRRF {
		kwDepth, vecDepth = pool, pool
	}
	if vectors && e.options().KeywordNorm == NormMean {
		kwDepth = n // the keyword mean needs every score
	}
	return kwDepth, vecDepth
}

// keywordSignal is the keyword half of a query: its top depth scores.
func keywordSignal(kwRes *index.KeywordResult, depth int) signal {
	kw := signal{top: kwRes.Top(depth)}
	for _, s := range kw.top {
		kw.sum += s.Score
	}
	kw.n = len(kw.top)
	return kw
}

// vectorSignal is the vector half of a query (qvec after the usage
// adapter): its top depth cosines and the catalog's sum of them. kw.n
// becomes the catalog's size.
func (e *Engine) vectorSignal(lm *learnedModel, sub index.Subset, qvec []float32, depth int, server string, kw *signal) signal {
	vs := lm.scanLearned(sub, qvec, depth, server)
	kw.n = max(kw.n, vs.N)
	return signal{top: vs.Top, sum: vs.Sum, n: vs.N}
}

// fillMissing gives each candidate of one signal that the other signal's
// top lacks its exact score in that other signal: a keyword candidate its
// cosine, a vector candidate its BM25F score (every tool's is in kwRes).
func (e *Engine) fillMissing(ix *index.Index, lm *learnedModel, kwRes *index.KeywordResult, qvec []float32, mode Mode, kw, vec *signal) {
	pool := e.options().Candidates
	if mode == ModeVector {
		pool = len(vec.top)
	}
	inKW := make(map[string]bool, len(kw.top))
	for _, s := range kw.top {
		inKW[s.ID] = true
	}
	inVec := make(map[string]bool, len(vec.top))
	for _, s := range vec.top {
		inVec[s.ID] = true
	}
	if mode != ModeVector {
		for _, s := range kw.top[:min(pool, len(kw.top))] {
			if inVec[s.ID] {
				continue
			}
			if c, ok := lm.cosine(ix, qvec, s.ID); ok {
				if vec.extra == nil {
					vec.extra = make(map[string]float64)
				}
				vec.extra[s.ID] = c
			}
		}
	}
	for _, s := range vec.top[:min(pool, len(vec.top))] {
		if inKW[s.ID] {
			continue
		}
		if b, ok := kwRes.Score(s.ID); ok {
			if kw.extra == nil {
				kw.extra = make(map[string]float64)
			}
			kw.extra[s.ID] = b
		}
	}
}

// snapshot is one index plus the count of searches using it. refs starts
// at 1 for the engine's own reference; the index is closed when it reaches 0.
type snapshot struct {
	ix    *index.Index
	refs  atomic.Int64
	names lazyNames // the tools' names, for exact matches
}

func newSnapshot(ix *index.Index) *snapshot {
	s := &snapshot{ix: ix}
	s.refs.Store(1)
	if ix != nil {
		// Off the first search's path, which would make them: the 8-bit
		// vector copy and the server sums, then the names table (every
		// search reads it; 40 ms at 10,000 tools on a 2 GHz core).
		go func() {
			if ix.HasVectors() {
				ix.PrepareScan()
			}
			s.names.get(ix)
		}()
	}
	return s
}

// acquire returns the current snapshot with a reference taken, or nil when
// the engine is closed. A snapshot whose count already fell to zero is being
// closed; the loop then reloads the pointer, which a Swap has moved on.
func (e *Engine) acquire() *snapshot {
	for {
		s := e.cur.Load()
		if s == nil {
			return nil
		}
		n := s.refs.Load()
		if n > 0 && s.refs.CompareAndSwap(n, n+1) {
			return s
		}
	}
}

func (s *snapshot) release(log *slog.Logger) {
	if s.refs.Add(-1) == 0 && s.ix != nil {
		if err := s.ix.Close(); err != nil {
			log.Warn("close old index", "err", err)
		}
	}
}
