// Package index owns the search index over a catalog: the Bleve BM25 index,
// the vector store (float32 rows read from the generation's file with pread,
// scanned exactly, with an 8-bit copy in memory read first), the catalog snapshot, the
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
	"io/fs"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
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

// modelCounter is an Embedder with a cache that says how many texts of a
// call its model embedded, the others answered by the cache
// (embed.Cached.EmbedCounted).
type modelCounter interface {
	EmbedCounted(ctx context.Context, texts []string) ([][]float32, int, error)
}

// countingEmbedder is an Embedder whose calls go through its modelCounter,
// adding up what the model embedded.
type countingEmbedder struct {
	Embedder
	counter modelCounter
	model   atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out, n, err := c.counter.EmbedCounted(ctx, texts)
	c.model.Add(int64(n))
	return out, err
}

// DocumentPrefix is the wrapped embedder's (DocumentPrefix looks for it).
func (c *countingEmbedder) DocumentPrefix() string { return DocumentPrefix(c.Embedder) }

// countModel wraps emb to count the texts its model embeds; nil when emb
// does not say.
func countModel(emb Embedder) *countingEmbedder {
	if mc, ok := emb.(modelCounter); ok {
		return &countingEmbedder{Embedder: emb, counter: mc}
	}
	return nil
}

// DocumentPrefix is what emb's model wants before a document (see
// embed.Embedder.DocumentPrefix; "" when it says nothing).
func DocumentPrefix(emb Embedder) string {
	if p, ok := emb.(interface{ DocumentPrefix() string }); ok {
		return p.DocumentPrefix()
	}
	return ""
}

// QueryPrefix is what emb's model wants before a search query ("" when it
// says nothing).
func QueryPrefix(emb Embedder) string {
	if p, ok := emb.(interface{ QueryPrefix() string }); ok {
		return p.QueryPrefix()
	}
	return ""
}

// DocumentTexts is every text the tools are embedded as (their views,
// catalog.Views, after emb's document prefix), each once: what an
// embedding cache keeps for them (embed.Cached.Sweep).
func DocumentTexts(emb Embedder, tools []catalog.Tool) []string {
	prefix := DocumentPrefix(emb)
	seen := map[string]bool{}
	var texts []string
	for _, t := range tools {
		for _, v := range catalog.Views(t) {
			if !seen[v] {
				seen[v] = true
				texts = append(texts, prefix+v)
			}
		}
	}
	return texts
}

// EmbedQueries embeds search queries (texts with the query prefix already
// put before them): through emb's EmbedQueries when it has one (the
// embedding cache, which lets query vectors expire), else through Embed.
func EmbedQueries(ctx context.Context, emb Embedder, texts []string) ([][]float32, error) {
	if q, ok := emb.(interface {
		EmbedQueries(context.Context, []string) ([][]float32, error)
	}); ok {
		return q.EmbedQueries(ctx, texts)
	}
	return emb.Embed(ctx, texts)
}

// EmbedKnownQueries is EmbedQueries for queries that are not a client's
// new words (learned pairs, eval's files): through emb's EmbedKnownQueries
// when it has one (the embedding cache, which stores them outside its
// daily bound on new query vectors), else as EmbedQueries.
func EmbedKnownQueries(ctx context.Context, emb Embedder, texts []string) ([][]float32, error) {
	if q, ok := emb.(interface {
		EmbedKnownQueries(context.Context, []string) ([][]float32, error)
	}); ok {
		return q.EmbedKnownQueries(ctx, texts)
	}
	return EmbedQueries(ctx, emb, texts)
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
	// MkdirAll makes the index folder given to Ensure when it is missing
	// (nil: os.MkdirAll); a gateway passes its storage.Gate's, which
	// never makes the data folder again. The folders inside it are only
	// ever made in it (storage.MkdirBelow).
	MkdirAll func(dir string, perm fs.FileMode) error
	// AnyFormat lets Open take an index whose manifest names another
	// format or analyzer than this toolgate's, as long as its files read
	// as this toolgate's layout (Open checks them as ever): a gateway
	// started by an upgrade that changed the format, or a rollback over
	// one, answers from it while it builds the index of its own format.
	// Such an index's Fingerprint is "", so that the first build replaces
	// it; OtherFormat says its format.
	AnyFormat bool
	// Config names the config whose catalog Ensure builds (config.File.
	// Source: its file's absolute path; "" = none, a tools file). The
	// folder keeps the last generation of each other config named (a
	// gateway of another config on the data folder, Manifest.Others),
	// for its warm start (OpenFor) and its vectors.
	Config string
	// Lend are indexes of the same model whose vectors a build on disk
	// copies for the tools they hold with the same views, as it copies the
	// previous generation's: a gateway lends the index it serves, so that
	// one built in memory while the data folder could not take writes (or
	// served from the open files of an index folder removed) is written
	// to the folder without embedding its tools again. Without it every
	// tool was embedded again once the folder took writes (the embedding
	// cache could not store them meanwhile): 45 tools 1.7 s of CPU, some
	// 60 s at 10,000.
	Lend []*Index
}

func (o *Options) config() string {
	if o == nil {
		return ""
	}
	return o.Config
}

func (o *Options) mkdirAll(dir string, perm fs.FileMode) error {
	if o == nil || o.MkdirAll == nil {
		return os.MkdirAll(dir, perm)
	}
	return o.MkdirAll(dir, perm)
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
	tools   []catalog.Tool // sorted by ID; row i of the vectors is tools[i]
	byID    map[string]int // ID → row
	bi      bleve.Index
	modelID string
	fp      string // the catalog's fingerprint as the manifest says it ("" = built in memory, or of another format)
	// otherFormat is the manifest's format when it is not FormatVersion
	// (or its analyzer not this toolgate's): opened with AnyFormat.
	otherFormat int
	dim         int
	// The vectors (rows.go): len(tools)×dim in memory (Build), or the
	// generation's file (Open); both nil without vectors.
	vecs    []float32
	vf      *vectorFile
	rowBufs sync.Pool // *[]float32 of one row, for row

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool

	ids []string // tools[i].ID(); byID's keys are these strings

	langs []string // the tools' languages other than English, sorted (languagesOf)

	scanBufs sync.Pool // *[]float32 of len(tools) scores, for Scan

	kwLen  map[string]int64 // tokens per keyword field over all tools (BM25F lengths)
	kwOnce sync.Once
	kr     *keywordReader // made on first use (KeywordAll)

	sumsOnce sync.Once
	sums     *vectorSums // made on first use (Scan, CosineSum)
	copyOnce sync.Once
	copy8    atomic.Pointer[vectorCopy] // made by PrepareScan
}

// idAt is tools[i].ID() without building the string on every search.
func (ix *Index) idAt(i int) string { return ix.ids[i] }

// IDs are the tools' IDs, in Tools' order: the index's own strings (one
// copy of each, at 50,000 tools 2.5 MB that every user of the IDs used to
// build again), in a slice the caller may change.
func (ix *Index) IDs() []string { return slices.Clone(ix.ids) }

// idTable returns the IDs of tools, sorted by ID, and the row of each ID,
// one string an ID shared by both, or the first ID found twice.
func idTable(tools []catalog.Tool) (ids []string, byID map[string]int, dup string) {
	ids = make([]string, len(tools))
	byID = make(map[string]int, len(tools))
	for i, t := range tools {
		id := t.ID()
		if _, ok := byID[id]; ok {
			return nil, nil, id
		}
		ids[i], byID[id] = id, i
	}
	return ids, byID, ""
}

// Field names in the Bleve documents.
const (
	fieldName   = "name"
	fieldServer = "server"
	fieldDesc   = "description"
	fieldParams = "params"
	fieldSrvKey = "srv" // exact server name, for the filter only
	// fieldLang names the document type of a tool in another language
	// than English: the mapping of that type reads its fields with that
	// language's analyzer. Not indexed.
	fieldLang = "lang"

	analyzerName = "toolgate"
)

// analyzerFilters is the token filter chain after the tokenizer. Porter
// stemming and English stop words measured better than neither on both
// bench splits (see keyword.go). The first three change no token of a text
// in ASCII (the bench splits' figures are the same with and without them):
// NFC composes what a decomposed text writes in two characters,
// cjk_width reads full-width Latin and half-width kana as their usual
// forms, and cjk_bigram cuts the tokenizer's runs of Chinese and
// Japanese characters, which have no spaces between words, into pairs.
//
// A server's tools in another language (Tool.Language) are read with
// sharedFilters and that language's stop words and stemmer instead of the
// last two (languageFilters), and queries in each (queryGroups).
var analyzerFilters = slices.Concat(sharedFilters, splitFilters, englishFilters)

// newMapping is the index mapping of a catalog whose tools are in English
// and langs (languagesOf). Without langs it is the mapping of before
// languages, byte for byte: an older toolgate opens such an index (a
// rollback, a warm start) and updates it in place.
func newMapping(langs []string) (mapping.IndexMapping, error) {
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
	im.DefaultMapping = docMapping(analyzerName)
	// One document type per language, of the same fields, so that BM25F
	// reads every tool's terms from the same postings.
	if len(langs) > 0 {
		im.TypeField = fieldLang
	}
	for _, lang := range langs {
		if err := im.AddCustomAnalyzer(analyzerOf(lang), map[string]interface{}{
			"type":          custom.Name,
			"tokenizer":     identTokenizerName,
			"token_filters": toAny(languageChain(lang)),
		}); err != nil {
			return nil, fmt.Errorf("index mapping: %w", err)
		}
		im.AddDocumentMapping(lang, docMapping(analyzerOf(lang)))
	}
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false
	return im, nil
}

// docMapping maps a tool's keyword fields, read with analyzer, and its
// server's exact name.
func docMapping(analyzer string) *mapping.DocumentMapping {
	doc := bleve.NewDocumentStaticMapping()
	for _, f := range []string{fieldName, fieldServer, fieldDesc, fieldParams} {
		fm := bleve.NewTextFieldMapping()
		fm.Analyzer = analyzer
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
	return doc
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
	doc := map[string]interface{}{
		fieldName:   name,
		fieldServer: t.Server,
		fieldDesc:   t.Description,
		fieldParams: catalog.ParamsText(t),
		fieldSrvKey: t.Server,
	}
	if t.Language != "" {
		doc[fieldLang] = t.Language
	}
	return doc
}

// prepareTools copies and sorts tools by ID, rejecting duplicate or empty
// IDs; it returns the IDs and the row of each (idTable).
func prepareTools(tools []catalog.Tool) ([]catalog.Tool, []string, map[string]int, error) {
	sorted := make([]catalog.Tool, len(tools))
	copy(sorted, tools)
	sort.SliceStable(sorted, func(i, j int) bool { return catalog.CompareID(&sorted[i], &sorted[j]) < 0 })
	for _, t := range sorted {
		if t.Server == "" || t.Name == "" {
			return nil, nil, nil, fmt.Errorf("tool %q: server and name must not be empty", t.ID())
		}
	}
	ids, byID, dup := idTable(sorted)
	if dup != "" {
		return nil, nil, nil, fmt.Errorf("tool %q listed twice: tool names must be unique per server", dup)
	}
	if _, err := serverLanguages(sorted); err != nil {
		return nil, nil, nil, err
	}
	return sorted, ids, byID, nil
}

// Build indexes tools in memory. With a nil Embedder the index is BM25 only.
func Build(ctx context.Context, tools []catalog.Tool, emb Embedder, opts *Options) (*Index, error) {
	sorted, ids, byID, err := prepareTools(tools)
	if err != nil {
		return nil, err
	}
	langs := languagesOf(sorted)
	bi, err := newBleve("", langs)
	if err != nil {
		return nil, err
	}
	ix := &Index{tools: sorted, ids: ids, byID: byID, bi: bi, langs: langs}
	if err := fillBleve(ctx, bi, sorted); err != nil {
		_ = ix.Close()
		return nil, err
	}
	if ix.kwLen, err = fieldLengths(bi.Mapping(), sorted); err != nil {
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
func newBleve(path string, langs []string) (bleve.Index, error) {
	m, err := newMapping(langs)
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

// embedAll embeds the views of every tool (catalog.Views) in batches and
// returns the row-major matrix of their normalised sums.
func embedAll(ctx context.Context, tools []catalog.Tool, emb Embedder, opts *Options) ([]float32, error) {
	dim := emb.Dim()
	if dim <= 0 {
		return nil, fmt.Errorf("embedder %s reports dimension %d", emb.ModelID(), dim)
	}
	vecs := make([]float32, len(tools)*dim)
	bs := opts.batchSize()
	opts.progress(0, len(tools))
	prefix := DocumentPrefix(emb)
	sum := make([]float64, dim)
	for start := 0; start < len(tools); start += bs {
		end := min(start+bs, len(tools))
		// The batch's views, each distinct text once (tools of several
		// servers often share a name).
		var texts []string
		at := map[string]int{}
		views := make([][]int, end-start)
		for k, t := range tools[start:end] {
			for _, v := range catalog.Views(t) {
				i, ok := at[v]
				if !ok {
					i = len(texts)
					at[v] = i
					texts = append(texts, prefix+v)
				}
				views[k] = append(views[k], i)
			}
		}
		out, err := emb.Embed(ctx, texts)
		if err != nil {
			return nil, fmt.Errorf("embed tools %d-%d of %d: %w", start+1, end, len(tools), err)
		}
		if len(out) != len(texts) {
			return nil, fmt.Errorf("embedder returned %d vectors for %d texts", len(out), len(texts))
		}
		for _, v := range out {
			if len(v) != dim {
				return nil, fmt.Errorf("embedder returned a %d-dimensional vector, want %d", len(v), dim)
			}
		}
		for k, idx := range views {
			clear(sum)
			for _, i := range idx {
				for d, x := range out[i] {
					sum[d] += float64(x)
				}
			}
			var n float64
			for _, x := range sum {
				n += x * x
			}
			n = math.Sqrt(n)
			row := vecs[(start+k)*dim : (start+k+1)*dim]
			for d, x := range sum {
				row[d] = float32(x / n)
			}
		}
		opts.progress(end, len(tools))
	}
	return vecs, nil
}

// queryGroups are the keyword terms of a query: for an index of English
// tools only, each distinct term of the index analyzer (queryTerms) on its
// own; with tools in other languages, each word's terms in English and in
// each of them (see the function queryGroups).
func (ix *Index) queryGroups(text string) ([][]string, error) {
	if len(ix.langs) > 0 {
		return queryGroups(text, ix.langs), nil
	}
	terms, err := queryTerms(ix.bi, text)
	groups := make([][]string, len(terms))
	for i := range terms {
		groups[i] = terms[i : i+1 : i+1]
	}
	return groups, err
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

// HasVectors reports whether the index holds embeddings (Nearest works).
func (ix *Index) HasVectors() bool { return ix.vecs != nil || ix.vf != nil }

// ModelID is the embedder's model ID the vectors were made with ("" without vectors).
func (ix *Index) ModelID() string { return ix.modelID }

// Fingerprint is the fingerprint (catalog.Fingerprint) of the catalog an
// index opened from disk was built for, as its manifest records it; "" for
// an index built in memory (Build). The runtime loop compares it with the
// live catalog's to skip a re-index that would change nothing.
func (ix *Index) Fingerprint() string { return ix.fp }

// OtherFormat is the format of an index Options.AnyFormat let Open take
// although it is not this toolgate's (its manifest's format, or this one's
// when only the analyzer differs), else 0.
func (ix *Index) OtherFormat() int { return ix.otherFormat }

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

// Close releases the Bleve index and closes the vectors file. It is
// idempotent; the Index must not be used afterwards (reads of its vectors
// then fail: Scan, Nearest, Cosine and Vector find nothing).
func (ix *Index) Close() error {
	ix.closeOnce.Do(func() {
		ix.closed.Store(true)
		// Wait for a PrepareScan in flight, and keep any later one from
		// reading the vectors once they are closed.
		ix.sumsOnce.Do(func() {})
		ix.copyOnce.Do(func() {})
		ix.kwOnce.Do(func() {})
		var errs []error
		if ix.kr != nil && ix.kr.r != nil {
			errs = append(errs, ix.kr.r.Close())
		}
		if ix.bi != nil {
			errs = append(errs, ix.bi.Close())
		}
		if ix.vf != nil {
			errs = append(errs, ix.vf.close())
		}
		ix.closeErr = errors.Join(errs...)
	})
	return ix.closeErr
}
