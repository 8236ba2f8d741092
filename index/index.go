// Package index owns the search index over a catalog: the Bleve BM25 index,
// the vector store (float32 rows memory-mapped from the generation's file,
// scanned exactly, with an 8-bit copy read first), the catalog snapshot, the
// generations on disk with their manifest, and Ensure, which opens an index
// that is up to date or builds one. The Tool type and the tools.jsonl reader
// live in the catalog leaf package below it.
//
// The index never speaks MCP: backends' tools are converted into catalog
// tools by the gateway before they get here.
package index

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
	bindex "github.com/blevesearch/bleve_index_api"
	"github.com/toolgate/toolgate/index/catalog"
)

// Embedder turns texts into unit-length vectors. embed.Embedder implements it
// (and caches by model and text, so this package never caches).
type Embedder interface {
	ModelID() string // e.g. "all-MiniLM-L6-v2/fp32@<sha256 prefix>"
	Dim() int        // 384
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Options tune Build, Ensure and Open. A nil *Options means defaults.
type Options struct {
	Logger    *slog.Logger          // nil = discard
	BatchSize int                   // texts per Embed call; 0 = 256
	Progress  func(done, total int) // called after each embedding batch; may be nil
	// LockWait is how long Ensure waits for another process's build in the
	// same folder to finish before giving up with ErrLocked. 0 = refuse at
	// once (toolgate index); a gateway that can keep serving its current
	// index meanwhile may wait.
	LockWait time.Duration
}

func (o *Options) logger() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o.Logger
}

func (o *Options) batchSize() int {
	if o == nil || o.BatchSize <= 0 {
		// The embedder sorts one call's texts by length before cutting
		// them into model batches: more texts per call, less padding
		// (BenchmarkEmbedCatalog: call 256 vs 32, +17% texts/s).
		return 256
	}
	return o.BatchSize
}

func (o *Options) progress(done, total int) {
	if o != nil && o.Progress != nil {
		o.Progress(done, total)
	}
}

// Scored is one search result of either half of the index.
type Scored struct {
	ID    string
	Score float64
}

// Index is an immutable snapshot of a catalog: the tools, their BM25 index
// and (optionally) their embeddings. It is safe for concurrent use; a new
// catalog means a new Index, swapped in by the owner.
type Index struct {
	tools   []catalog.Tool // sorted by ID; row i of vecs is tools[i]
	byID    map[string]int // ID → row
	bi      bleve.Index
	modelID string
	dim     int
	vecs    []float32 // len(tools)×dim, nil without vectors
	release func() error

	closeOnce sync.Once
	closeErr  error

	idsOnce sync.Once
	ids     []string // tools[i].ID(), made on first use (Nearest)

	scanBufs sync.Pool // *[]float32 of len(tools) scores, for Scan

	sumsOnce sync.Once
	sums     *vectorSums // made on first use (Scan, CosineSum)
	copyOnce sync.Once
	copy8    atomic.Pointer[vectorCopy] // made by PrepareScan
}

// idAt is tools[i].ID() without building the string on every search.
func (ix *Index) idAt(i int) string {
	ix.idsOnce.Do(func() {
		ix.ids = make([]string, len(ix.tools))
		for j, t := range ix.tools {
			ix.ids[j] = t.ID()
		}
	})
	return ix.ids[i]
}

// Field names in the Bleve documents.
const (
	fieldName   = "name"
	fieldServer = "server"
	fieldDesc   = "description"
	fieldParams = "params"
	fieldSrvKey = "srv" // exact server name, for the filter only

	analyzerName = "toolgate"
)

func init() {
	// Bleve scores a document matched by several clauses of a disjunction
	// by adding the clauses' scores in the order it finds them. Past 10
	// clauses (DisjunctionHeapTakeover, which Bleve documents as the
	// application's to set) it keeps them in a heap whose order depends on
	// how the search got to the document, so the same document could score
	// differently in its last bits in a whole-catalog search and in one
	// restricted to a few IDs (KeywordScores), and two identical documents
	// could differ. Below the takeover the clauses are added in query
	// order, always: scores are a function of the document and the query
	// alone (TestKeywordTopAndScoresMatchWhole fails without this).
	searcher.DisjunctionHeapTakeover = math.MaxInt
}

// fieldBoosts weigh the fields of one query term. The name field is short,
// so BM25's length normalisation already lifts its matches; boosting it
// further measured worse on both bench splits (the sweep of
// index/sweep_test.go as of e35c016; the ranking golden in search now holds
// the figures).
var fieldBoosts = map[string]float64{
	fieldName:   0.6,
	fieldServer: 0.5,
	fieldDesc:   1.0,
	fieldParams: 0.3,
}

// analyzerFilters is the token filter chain after identifier splitting.
// Porter stemming and English stop words measured better than neither on both
// bench splits (the same sweep).
var analyzerFilters = []string{identSplitName, lowercase.Name, en.StopName, porter.Name}

func newMapping() (mapping.IndexMapping, error) {
	im := bleve.NewIndexMapping()
	im.ScoringModel = bindex.BM25Scoring
	if err := im.AddCustomAnalyzer(analyzerName, map[string]interface{}{
		"type":          custom.Name,
		"tokenizer":     identTokenizerName,
		"token_filters": toAny(analyzerFilters),
	}); err != nil {
		return nil, fmt.Errorf("index mapping: %w", err)
	}
	im.DefaultAnalyzer = analyzerName
	doc := bleve.NewDocumentStaticMapping()
	for _, f := range []string{fieldName, fieldServer, fieldDesc, fieldParams} {
		fm := bleve.NewTextFieldMapping()
		fm.Analyzer = analyzerName
		fm.Store = false
		fm.IncludeInAll = false
		fm.IncludeTermVectors = false
		fm.DocValues = false
		doc.AddFieldMappingsAt(f, fm)
	}
	km := bleve.NewKeywordFieldMapping()
	km.Analyzer = keyword.Name
	km.Store = false
	km.IncludeInAll = false
	km.IncludeTermVectors = false
	km.DocValues = false
	doc.AddFieldMappingsAt(fieldSrvKey, km)
	im.DefaultMapping = doc
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false
	return im, nil
}

func toAny(ss []string) []interface{} {
	out := make([]interface{}, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func bleveDoc(t catalog.Tool) map[string]interface{} {
	name := t.Name
	if t.Title != "" {
		name += " " + t.Title
	}
	return map[string]interface{}{
		fieldName:   name,
		fieldServer: t.Server,
		fieldDesc:   t.Description,
		fieldParams: catalog.ParamsText(t),
		fieldSrvKey: t.Server,
	}
}

// prepareTools copies and sorts tools by ID, rejecting duplicate or empty IDs.
func prepareTools(tools []catalog.Tool) ([]catalog.Tool, map[string]int, error) {
	sorted := make([]catalog.Tool, len(tools))
	copy(sorted, tools)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ID() < sorted[j].ID() })
	byID := make(map[string]int, len(sorted))
	for i, t := range sorted {
		if t.Server == "" || t.Name == "" {
			return nil, nil, fmt.Errorf("tool %q: server and name must not be empty", t.ID())
		}
		if _, dup := byID[t.ID()]; dup {
			return nil, nil, fmt.Errorf("tool %q listed twice: tool names must be unique per server", t.ID())
		}
		byID[t.ID()] = i
	}
	return sorted, byID, nil
}

// Build indexes tools in memory. With a nil Embedder the index is BM25 only.
func Build(ctx context.Context, tools []catalog.Tool, emb Embedder, opts *Options) (*Index, error) {
	sorted, byID, err := prepareTools(tools)
	if err != nil {
		return nil, err
	}
	bi, err := newBleve("")
	if err != nil {
		return nil, err
	}
	ix := &Index{tools: sorted, byID: byID, bi: bi}
	if err := fillBleve(ctx, bi, sorted); err != nil {
		_ = ix.Close()
		return nil, err
	}
	if emb != nil {
		vecs, err := embedAll(ctx, sorted, emb, opts)
		if err != nil {
			_ = ix.Close()
			return nil, err
		}
		ix.vecs, ix.dim, ix.modelID = vecs, emb.Dim(), emb.ModelID()
	}
	return ix, nil
}

// newBleve creates a scorch index at path, or in memory for path "". Scorch
// (not the in-memory upsidedown store) is needed for BM25: only it reports
// the field statistics BM25 needs.
func newBleve(path string) (bleve.Index, error) {
	m, err := newMapping()
	if err != nil {
		return nil, err
	}
	bi, err := bleve.NewUsing(path, m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("create bleve index: %w", err)
	}
	return bi, nil
}

func fillBleve(ctx context.Context, bi bleve.Index, tools []catalog.Tool) error {
	const batch = 1000
	for start := 0; start < len(tools); start += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := bi.NewBatch()
		for _, t := range tools[start:min(start+batch, len(tools))] {
			if err := b.Index(t.ID(), bleveDoc(t)); err != nil {
				return fmt.Errorf("index tool %q: %w", t.ID(), err)
			}
		}
		if err := bi.Batch(b); err != nil {
			return fmt.Errorf("index batch: %w", err)
		}
	}
	return nil
}

// embedAll embeds DocumentText of every tool in batches and returns the
// row-major matrix.
func embedAll(ctx context.Context, tools []catalog.Tool, emb Embedder, opts *Options) ([]float32, error) {
	dim := emb.Dim()
	if dim <= 0 {
		return nil, fmt.Errorf("embedder %s reports dimension %d", emb.ModelID(), dim)
	}
	vecs := make([]float32, len(tools)*dim)
	bs := opts.batchSize()
	opts.progress(0, len(tools))
	for start := 0; start < len(tools); start += bs {
		end := min(start+bs, len(tools))
		texts := make([]string, 0, end-start)
		for _, t := range tools[start:end] {
			texts = append(texts, catalog.DocumentText(t))
		}
		out, err := emb.Embed(ctx, texts)
		if err != nil {
			return nil, fmt.Errorf("embed tools %d-%d of %d: %w", start+1, end, len(tools), err)
		}
		if len(out) != len(texts) {
			return nil, fmt.Errorf("embedder returned %d vectors for %d texts", len(out), len(texts))
		}
		for i, v := range out {
			if len(v) != dim {
				return nil, fmt.Errorf("embedder returned a %d-dimensional vector, want %d", len(v), dim)
			}
			copy(vecs[(start+i)*dim:], v)
		}
		opts.progress(end, len(tools))
	}
	return vecs, nil
}

// Keyword runs a BM25 query and returns raw Bleve scores, best first. Every
// query word is looked up in every field (OR, not a phrase), weighted by
// fieldBoosts. server "" searches all servers, otherwise only that server's tools.
func (ix *Index) Keyword(query string, k int, server string) ([]Scored, error) {
	if k <= 0 || len(ix.tools) == 0 {
		return nil, nil
	}
	q, err := ix.keywordQuery(query, server)
	if err != nil || q == nil {
		return nil, err
	}
	// Equal scores are put in ID order here rather than by asking Bleve to
	// sort on _id, which loads every matching document's ID: at 50,000
	// tools and k = all that was 7× slower. Bleve returns hits best first,
	// so only runs of equal scores need sorting (a full stable sort of the
	// hits was a fifth of Keyword at k = all). Bleve breaks ties at its
	// cut-off by its own document order, so one more hit than asked is
	// fetched: while the last one fetched ties with the k-th, the run of
	// equal scores may go on past the cut, and the fetch is repeated deeper.
	// The first k are then exactly the first k of the whole ranking.
	fetch := k
	if fetch < len(ix.tools) {
		fetch = k + 1
	}
	for {
		req := bleve.NewSearchRequestOptions(q, fetch, 0, false)
		res, err := ix.bi.Search(req)
		if err != nil {
			return nil, fmt.Errorf("keyword search: %w", err)
		}
		out := make([]Scored, 0, len(res.Hits))
		for _, h := range res.Hits {
			out = append(out, Scored{ID: h.ID, Score: h.Score})
		}
		if len(out) == fetch && fetch > k && out[fetch-1].Score == out[k-1].Score {
			fetch = max(2*fetch, k+64)
			continue
		}
		sortTies(out)
		return out[:min(k, len(out))], nil
	}
}

// KeywordScores returns the raw BM25 scores of the tools ids for query —
// the scores Keyword gives them — without ranking the rest of the catalog:
// the query runs restricted to those documents. Tools that match no query
// term (or are not of server, when server is set) are absent from the map.
func (ix *Index) KeywordScores(query string, ids []string, server string) (map[string]float64, error) {
	if len(ids) == 0 || len(ix.tools) == 0 {
		return nil, nil
	}
	q, err := ix.keywordQuery(query, server)
	if err != nil || q == nil {
		return nil, err
	}
	// Like the server filter, the ID filter scores 0 and has weight 0, so
	// the query norm and every hit's score are those of the whole-catalog
	// query (TestKeywordScoresMatchKeyword checks them bit for bit).
	dq := bleve.NewDocIDQuery(ids)
	dq.SetBoost(0)
	req := bleve.NewSearchRequestOptions(bleve.NewConjunctionQuery(q, dq), len(ids), 0, false)
	res, err := ix.bi.Search(req)
	if err != nil {
		return nil, fmt.Errorf("keyword search: %w", err)
	}
	out := make(map[string]float64, len(res.Hits))
	for _, h := range res.Hits {
		out[h.ID] = h.Score
	}
	return out, nil
}

// sortTies orders hits by score, best first, and equal scores by ID. Hits
// that are already in score order cost one pass.
func sortTies(out []Scored) {
	for i := 1; i < len(out); i++ {
		if out[i].Score > out[i-1].Score {
			slices.SortStableFunc(out, cmpScored)
			return
		}
	}
	for start := 0; start < len(out); {
		end := start + 1
		for end < len(out) && out[end].Score == out[start].Score {
			end++
		}
		if end-start > 1 {
			slices.SortFunc(out[start:end], cmpScored)
		}
		start = end
	}
}

func cmpScored(a, b Scored) int {
	if a.Score != b.Score {
		if a.Score > b.Score {
			return -1
		}
		return 1
	}
	return strings.Compare(a.ID, b.ID)
}

// queryTerms analyzes a query with the index analyzer and returns its
// distinct terms in order of first appearance.
func queryTerms(bi bleve.Index, text string) ([]string, error) {
	a := bi.Mapping().AnalyzerNamed(analyzerName)
	if a == nil {
		return nil, fmt.Errorf("analyze query: analyzer %q missing from the index mapping", analyzerName)
	}
	toks := a.Analyze([]byte(text))
	seen := map[string]bool{}
	var terms []string
	for _, t := range toks {
		s := string(t.Term)
		if !seen[s] {
			seen[s] = true
			terms = append(terms, s)
		}
	}
	return terms, nil
}

func (ix *Index) keywordQuery(text, server string) (query.Query, error) {
	terms, err := queryTerms(ix.bi, text)
	if err != nil || len(terms) == 0 {
		return nil, err
	}
	var clauses []query.Query
	for _, term := range terms {
		var per []query.Query
		for _, f := range []string{fieldName, fieldServer, fieldDesc, fieldParams} {
			if fieldBoosts[f] == 0 {
				continue
			}
			tq := bleve.NewTermQuery(term)
			tq.SetField(f)
			tq.SetBoost(fieldBoosts[f])
			per = append(per, tq)
		}
		clauses = append(clauses, per...)
	}
	var q query.Query = bleve.NewDisjunctionQuery(clauses...)
	if server != "" {
		// The filter term scores 0, so hits keep their raw BM25 scores.
		sq := bleve.NewTermQuery(server)
		sq.SetField(fieldSrvKey)
		sq.SetBoost(0)
		q = bleve.NewConjunctionQuery(q, sq)
	}
	return q, nil
}

// HasVectors reports whether the index holds embeddings (Nearest works).
func (ix *Index) HasVectors() bool { return ix.vecs != nil }

// ModelID is the embedder's model ID the vectors were made with ("" without vectors).
func (ix *Index) ModelID() string { return ix.modelID }

// Dim is the vector dimension (0 without vectors).
func (ix *Index) Dim() int { return ix.dim }

// Tools returns the catalog, sorted by ID. The slice is shared: do not modify it.
func (ix *Index) Tools() []catalog.Tool { return ix.tools }

// Tool looks a tool up by its namespaced ID.
func (ix *Index) Tool(id string) (catalog.Tool, bool) {
	i, ok := ix.byID[id]
	if !ok {
		return catalog.Tool{}, false
	}
	return ix.tools[i], true
}

// Len is the number of tools.
func (ix *Index) Len() int { return len(ix.tools) }

// Close releases the Bleve index and any mapped vectors. It is idempotent;
// the Index must not be used afterwards.
func (ix *Index) Close() error {
	ix.closeOnce.Do(func() {
		// Wait for a PrepareScan in flight, and keep any later one from
		// reading the vectors once they are unmapped.
		ix.sumsOnce.Do(func() {})
		ix.copyOnce.Do(func() {})
		var errs []error
		if ix.bi != nil {
			errs = append(errs, ix.bi.Close())
		}
		if ix.release != nil {
			errs = append(errs, ix.release())
		}
		ix.closeErr = errors.Join(errs...)
	})
	return ix.closeErr
}
