package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/mapping"
	bindex "github.com/blevesearch/bleve_index_api"
	"github.com/toolgate/toolgate/index/catalog"
)

// The keyword signal is BM25F (Robertson & Zaragoza 2009) over the tool's
// fields, scored here from Bleve's postings rather than by Bleve's own
// "bm25" model, which is not BM25: it multiplies each term's score by its
// IDF a second time (the query weight) and by the query norm, takes the
// square root of the term frequency, multiplies a document's sum by the
// share of query clauses it matched (coord), and divides field lengths by
// the field's number of distinct terms per document instead of its average
// length. Each field was then scored on its own and the sums added, so a
// word found in the name, the description and the parameters counted three
// times with three IDFs. Measured on the bench dev splits with the same
// fields and analyzer (Hit@1 / nDCG@10 %, BM25 alone → hybrid at 0.4/0.6):
//
//	                                              azure-mcp            metatool
//	Bleve "bm25", fields summed (before)          71.1/87.3 → 83.2     44.1/56.8 → 54.5
//	textbook BM25, fields summed, same weights    75.0/88.6 → 83.2     43.9/56.3 → 55.4
//	BM25F name 1, description 1, params 0.3       75.9/87.4 → 86.6     42.5/55.6 → 55.1
//
// BM25F adds each field's length-normalised term frequency, weighted,
// before one saturation, and counts a term's document frequency over all
// fields: a word in the name and in the description is one strong match,
// not two. Porter stemming and English stop words stay: without stemming
// azure-mcp BM25 alone gains (79.3) but metatool loses 12 points (30.3),
// and hybrid loses on both.

// BM25F constants: the usual k1 and b (Elasticsearch's and Lucene's
// defaults, and the bench README's plain-BM25 reference).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// fieldWeights weigh each field's term frequency in BM25F. The name field
// holds the name (split into words and kept whole) and the title; params
// holds parameter names and descriptions, which are many and generic
// (tenant, subscription, retry policy …), hence their low weight. The
// server name counts like a name word: with one server it matches every
// tool alike and changes nothing; with several, "… on github" prefers
// github's tools.
var fieldWeights = map[string]float64{
	fieldName:   1,
	fieldServer: 1,
	fieldDesc:   1,
	fieldParams: 0.3,
}

// keywordFields are the fields the keyword signal scores, in the order their
// term frequencies are added (fixed, so that scores are bit-for-bit
// reproducible).
var keywordFields = []string{fieldName, fieldServer, fieldDesc, fieldParams}

// fieldLengths returns, per keyword field, the number of tokens the index's
// analyzer makes of tools' documents: what BM25F's average field length
// needs, which Bleve does not keep.
func fieldLengths(m mapping.IndexMapping, tools []catalog.Tool) (map[string]int64, error) {
	out := make(map[string]int64, len(keywordFields))
	for _, f := range keywordFields {
		out[f] = 0
	}
	for _, t := range tools {
		a, err := toolAnalyzer(m, t)
		if err != nil {
			return nil, err
		}
		doc := bleveDoc(t)
		for _, f := range keywordFields {
			out[f] += int64(len(a.Analyze([]byte(doc[f].(string)))))
		}
	}
	return out, nil
}

// toolAnalyzer is the analyzer of t's fields in the index mapping m: its
// language's (analyzerOf).
func toolAnalyzer(m mapping.IndexMapping, t catalog.Tool) (analysis.Analyzer, error) {
	name := analyzerOf(t.Language)
	a := m.AnalyzerNamed(name)
	if a == nil {
		return nil, fmt.Errorf("analyzer %q missing from the index mapping", name)
	}
	return a, nil
}

// keywordReader is what the keyword scorer reads, made once per Index: a
// Bleve reader held open for the Index's life (the index never changes)
// and the row of each Bleve document.
type keywordReader struct {
	r     bindex.IndexReader
	rows  []int32 // Bleve document number → row; -1 for none
	avg   [4]float64
	srv   []int32 // row → server number
	srvOf map[string]int32
	err   error
}

func (ix *Index) keywordReader() (*keywordReader, error) {
	ix.kwOnce.Do(func() {
		kr := &keywordReader{}
		ix.kr = kr
		if len(ix.kwLen) == 0 && len(ix.tools) > 0 {
			kr.err = fmt.Errorf("index has no keyword field lengths: %s", RebuildFix)
			return
		}
		for i, f := range keywordFields {
			kr.avg[i] = float64(ix.kwLen[f]) / float64(max(len(ix.tools), 1))
		}
		kr.srvOf = map[string]int32{}
		kr.srv = make([]int32, len(ix.tools))
		for i, t := range ix.tools {
			s, ok := kr.srvOf[t.Server]
			if !ok {
				s = int32(len(kr.srvOf))
				kr.srvOf[t.Server] = s
			}
			kr.srv[i] = s
		}
		ai, err := ix.bi.Advanced()
		if err != nil {
			kr.err = fmt.Errorf("keyword index: %w", err)
			return
		}
		r, err := ai.Reader()
		if err != nil {
			kr.err = fmt.Errorf("keyword index: %w", err)
			return
		}
		kr.r = r
		all, err := r.DocIDReaderAll()
		if err != nil {
			kr.err = fmt.Errorf("keyword index: %w", err)
			return
		}
		defer all.Close()
		for {
			id, err := all.Next()
			if err != nil {
				kr.err = fmt.Errorf("keyword index: %w", err)
				return
			}
			if id == nil {
				break
			}
			ext, err := r.ExternalID(id)
			if err != nil {
				kr.err = fmt.Errorf("keyword index: %w", err)
				return
			}
			row, ok := ix.byID[ext]
			if !ok {
				kr.err = fmt.Errorf("keyword index holds %q, which is not in the catalog", ext)
				return
			}
			n := id.Value()
			if n > uint64(8*len(ix.tools)+1024) {
				kr.err = fmt.Errorf("keyword index: document number %d out of range", n)
				return
			}
			for uint64(len(kr.rows)) <= n {
				kr.rows = append(kr.rows, -1)
			}
			kr.rows[n] = int32(row)
		}
	})
	return ix.kr, ix.kr.err
}

// errClosed is returned by searches on a closed Index.
var errClosed = errors.New("index closed")

// ExtraField is one more keyword field, kept outside the Bleve index: text
// per tool with a weight per tool (learned query terms). Its term
// frequencies join BM25F's like any field's. Make one with
// Index.NewExtraField; it belongs to that Index.
type ExtraField struct {
	postings map[string][]extraPosting
	avg      float64
}

type extraPosting struct {
	row   int32
	w     float64 // weight·tf / length normalisation
	cover float64 // how much of a term found here counts toward Coverage
}

// NewExtraField analyzes texts (tool ID → text) with each tool's analyzer
// (its language's) into a field weighted by weights (tool ID → weight; a tool without one
// weighs 1). Tools not in the index are ignored. BM25F normalises its
// lengths by the average over the whole catalog, tools without text
// counting as empty. A query term that a tool holds only in this field
// counts toward its Coverage as much as covers says (tool ID → share in
// [0,1]; a tool without one: fully).
func (ix *Index) NewExtraField(texts map[string]string, weights, covers map[string]float64) (*ExtraField, error) {
	type doc struct {
		row   int32
		tf    map[string]int
		n     int
		w     float64
		cover float64
	}
	var docs []doc
	var total int
	ids := make([]string, 0, len(texts))
	for id := range texts {
		ids = append(ids, id)
	}
	slices.Sort(ids) // fixed order: reproducible sums
	for _, id := range ids {
		row, ok := ix.byID[id]
		if !ok {
			continue
		}
		// A tool's learned queries are read in its language, as its
		// fields are: a query's terms in that language meet them.
		a, err := toolAnalyzer(ix.bi.Mapping(), ix.tools[row])
		if err != nil {
			return nil, err
		}
		toks := a.Analyze([]byte(texts[id]))
		if len(toks) == 0 {
			continue
		}
		d := doc{row: int32(row), tf: map[string]int{}, n: len(toks), w: 1, cover: 1}
		if w, ok := weights[id]; ok {
			d.w = w
		}
		if c, ok := covers[id]; ok {
			d.cover = min(max(c, 0), 1)
		}
		for _, t := range toks {
			d.tf[string(t.Term)]++
		}
		total += len(toks)
		docs = append(docs, d)
	}
	ef := &ExtraField{postings: map[string][]extraPosting{}}
	if total == 0 {
		return ef, nil
	}
	ef.avg = float64(total) / float64(max(len(ix.tools), 1))
	for _, d := range docs {
		norm := 1 - bm25B + bm25B*float64(d.n)/ef.avg
		for term, tf := range d.tf {
			ef.postings[term] = append(ef.postings[term], extraPosting{row: d.row, w: d.w * float64(tf) / norm, cover: d.cover})
		}
	}
	return ef, nil
}

// KeywordResult holds the BM25F score of every tool for one query.
type KeywordResult struct {
	ix      *Index
	scores  []float64 // by row; 0 = matches no query term (or filtered out)
	covered []float64 // by row: the IDF of the query terms the tool holds
	idfSum  float64   // the IDF of all the query's terms
	idfSeen float64   // the IDF of the query's terms some tool holds
	matched []int32   // rows with a score > 0, in no particular order
}

// Known is the share of the query (IDF-weighted) that some tool of the
// catalog holds: low for a query about things the catalog never mentions.
func (r *KeywordResult) Known() float64 {
	if r == nil || r.idfSum == 0 {
		return 0
	}
	return r.idfSeen / r.idfSum
}

// Coverage is the share of the query the tool's text holds: the IDF of the
// query terms found in any of its fields over the IDF of all of them (a
// term no tool holds has the highest IDF). 0 when it holds none. A term
// found only in the extra field counts as much as that field's cover share
// for the tool (see NewExtraField).
func (r *KeywordResult) Coverage(id string) float64 {
	if r == nil || len(r.covered) == 0 || r.idfSum == 0 {
		return 0
	}
	row, ok := r.ix.byID[id]
	if !ok {
		return 0
	}
	return r.covered[row] / r.idfSum
}

// Score is the tool's BM25F score; ok is false when it matches no query
// term (its score is 0).
func (r *KeywordResult) Score(id string) (float64, bool) {
	if r == nil || len(r.scores) == 0 {
		return 0, false
	}
	row, ok := r.ix.byID[id]
	if !ok || r.scores[row] == 0 {
		return 0, false
	}
	return r.scores[row], true
}

// Len is the number of tools that match at least one query term.
func (r *KeywordResult) Len() int {
	if r == nil {
		return 0
	}
	return len(r.matched)
}

// Top returns the k best-scoring tools, best first, equal scores in ID
// order: exactly the head of the whole ranking.
func (r *KeywordResult) Top(k int) []Scored {
	if r == nil || k <= 0 {
		return nil
	}
	rows := slices.Clone(r.matched)
	cmpRow := func(a, b int32) int {
		if sa, sb := r.scores[a], r.scores[b]; sa != sb {
			if sa > sb {
				return -1
			}
			return 1
		}
		return strings.Compare(r.ix.idAt(int(a)), r.ix.idAt(int(b)))
	}
	if k < len(rows) {
		// Partial selection: sort only what could be in the top.
		rows = topRows(rows, k, cmpRow)
	} else {
		slices.SortFunc(rows, cmpRow)
	}
	out := make([]Scored, len(rows))
	for i, row := range rows {
		out[i] = Scored{ID: r.ix.idAt(int(row)), Score: r.scores[row]}
	}
	return out
}

// topRows returns the k smallest rows under cmp, sorted.
func topRows(rows []int32, k int, cmp func(a, b int32) int) []int32 {
	// A bounded max-heap of the k best seen so far (the worst on top).
	h := make([]int32, 0, k)
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			w := l
			if r := l + 1; r < len(h) && cmp(h[r], h[l]) > 0 {
				w = r
			}
			if cmp(h[w], h[i]) <= 0 {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for _, row := range rows {
		if len(h) < k {
			h = append(h, row)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if cmp(h[i], h[p]) <= 0 {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if cmp(row, h[0]) < 0 {
			h[0] = row
			down(0)
		}
	}
	slices.SortFunc(h, cmp)
	return h
}

// KeywordAll scores every tool of server ("" for all) against query with
// BM25F over the Bleve fields and extra (nil for none).
func (ix *Index) KeywordAll(query, server string, extra *ExtraField) (*KeywordResult, error) {
	return Subset{ix: ix}.KeywordAll(query, server, extra)
}

// KeywordAll is Index.KeywordAll over the subset's tools: the others score
// 0, as other servers' do under a server filter. The scores of the tools
// it keeps are the whole catalog's, bit for bit.
func (s Subset) KeywordAll(query, server string, extra *ExtraField) (*KeywordResult, error) {
	ix, rows := s.ix, s.rows
	res := &KeywordResult{ix: ix}
	if ix.closed.Load() {
		return nil, errClosed
	}
	if len(ix.tools) == 0 {
		return res, nil
	}
	groups, err := ix.queryGroups(query)
	if err != nil || len(groups) == 0 {
		return res, err
	}
	kr, err := ix.keywordReader()
	if err != nil {
		return nil, err
	}
	want := int32(-1)
	if server != "" {
		s, ok := kr.srvOf[server]
		if !ok {
			return res, nil
		}
		want = s
	}
	n := len(ix.tools)
	res.scores = make([]float64, n)
	res.covered = make([]float64, n)
	tfw := make([]float64, n) // one term's weighted, normalised frequency
	// cover: how much of one term counts toward a tool's Coverage (1 from
	// its own fields, the extra field's share from that field only).
	var cover []float64
	if extra != nil {
		cover = make([]float64, n)
	}
	var touched []int32
	// A group is one query word: its terms in English and in the index's
	// other languages (queryGroups) are one term to BM25F, whichever of
	// them a tool holds (their frequencies added, the document frequency
	// of any of them), as a word in two spellings is. Without other
	// languages each group is one term.
	for _, group := range groups {
		touched = touched[:0]
		add := func(row int32, w float64) {
			if tfw[row] == 0 {
				touched = append(touched, row)
			}
			tfw[row] += w
		}
		for _, term := range group {
			if err := kr.addTerm(term, add, cover); err != nil {
				return nil, err
			}
			if extra != nil {
				for _, p := range extra.postings[term] {
					add(p.row, p.w)
					cover[p.row] = max(cover[p.row], p.cover)
				}
			}
		}
		// Document frequencies are the whole catalog's, also under a
		// server filter, so that a tool scores the same with and without it.
		df := float64(len(touched))
		idf := math.Log(1 + (float64(n)-df+0.5)/(df+0.5))
		res.idfSum += idf
		if len(touched) == 0 {
			continue
		}
		res.idfSeen += idf
		for _, row := range touched {
			t := tfw[row]
			tfw[row] = 0
			share := 1.0
			if cover != nil {
				share = cover[row]
				cover[row] = 0
			}
			if want >= 0 && kr.srv[row] != want || rows != nil && !rows.has(int(row)) {
				continue
			}
			if res.scores[row] == 0 {
				res.matched = append(res.matched, row)
			}
			res.scores[row] += idf * t * (bm25K1 + 1) / (t + bm25K1)
			res.covered[row] += idf * share
		}
	}
	return res, nil
}

// addTerm adds, through add, the weighted, length-normalised frequency of
// term in each keyword field of each tool that holds it, and marks those
// tools in cover (when not nil) as holding it in their own fields.
func (kr *keywordReader) addTerm(term string, add func(row int32, w float64), cover []float64) error {
	var tfd bindex.TermFieldDoc
	ctx := context.Background()
	for fi, f := range keywordFields {
		fw := fieldWeights[f]
		if fw == 0 || kr.avg[fi] == 0 {
			continue
		}
		tr, err := kr.r.TermFieldReader(ctx, []byte(term), f, true, true, false)
		if err != nil {
			return fmt.Errorf("keyword search: %w", err)
		}
		for {
			d, err := tr.Next(&tfd)
			if err != nil {
				_ = tr.Close()
				return fmt.Errorf("keyword search: %w", err)
			}
			if d == nil {
				break
			}
			num := d.ID.Value()
			if num >= uint64(len(kr.rows)) || kr.rows[num] < 0 {
				continue // a deleted document
			}
			// Bleve stores a field's norm as 1/√length.
			length := math.Round(1 / float64(d.Norm*d.Norm))
			row := kr.rows[num]
			add(row, fw*float64(d.Freq)/(1-bm25B+bm25B*length/kr.avg[fi]))
			if cover != nil {
				cover[row] = 1
			}
		}
		if err := tr.Close(); err != nil {
			return fmt.Errorf("keyword search: %w", err)
		}
	}
	return nil
}

// Keyword returns the k best tools of server ("" for all) for query by
// BM25F, best first (equal scores in ID order); tools that match no query
// term are left out.
func (ix *Index) Keyword(query string, k int, server string) ([]Scored, error) {
	return Subset{ix: ix}.Keyword(query, k, server)
}

// Keyword is Index.Keyword over the subset's tools.
func (s Subset) Keyword(query string, k int, server string) ([]Scored, error) {
	if k <= 0 {
		return nil, nil
	}
	r, err := s.KeywordAll(query, server, nil)
	if err != nil {
		return nil, err
	}
	return r.Top(k), nil
}

// KeywordScores returns the BM25F scores of the tools ids for query — the
// scores Keyword gives them. Tools that match no query term (or are not of
// server, when server is set) are absent from the map.
func (ix *Index) KeywordScores(query string, ids []string, server string) (map[string]float64, error) {
	return Subset{ix: ix}.KeywordScores(query, ids, server)
}

// KeywordScores is Index.KeywordScores for the ids in the subset (the
// others are absent from the map).
func (s Subset) KeywordScores(query string, ids []string, server string) (map[string]float64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	r, err := s.KeywordAll(query, server, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(ids))
	for _, id := range ids {
		if s, ok := r.Score(id); ok {
			out[id] = s
		}
	}
	return out, nil
}
