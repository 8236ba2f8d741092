package search

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/index"
)

// SearchWhole ranks q the way Search did before it pruned: both signals
// fetched for the whole (server-filtered) catalog, every candidate's score
// read from those lists, the mean cosine over all of them. It is the
// reference TestPrunedMatchesWhole holds Search to; it does not run the
// embedder concurrently and it never degrades.
func (e *Engine) SearchWhole(ctx context.Context, q Query) (Result, error) {
	mode := q.Mode
	if mode == "" {
		mode = e.opts.Mode
	}
	limit := q.limit()
	s := e.acquire()
	defer s.release(e.log)
	ix := s.ix
	text := strings.TrimSpace(q.Text)
	n := ix.Len()

	kwAll, err := ix.Keyword(text, n, q.Server)
	if err != nil {
		return Result{}, err
	}
	var vecAll []index.Scored
	var qvec []float32
	if mode.needsVectors() {
		vecs, err := e.emb.Embed(ctx, []string{text})
		if err != nil {
			return Result{}, err
		}
		qvec = vecs[0]
		vecAll = ix.Nearest(qvec, n, q.Server)
		if vecAll == nil {
			return Result{}, fmt.Errorf("no vectors")
		}
	}
	kw := signal{top: kwAll}
	if !mode.needsVectors() {
		// BM25 alone ranks its own top-limit (and NormMean sees only those).
		kw.top = kwAll[:min(limit, len(kwAll))]
	}
	for _, h := range kw.top {
		kw.sum += h.Score
	}
	kw.n = max(len(kw.top), len(vecAll))
	var vec signal
	if vecAll != nil {
		// The catalog's cosine sum is the query's dot product with the
		// catalog's vector sum (index.TestScanMatchesNearest holds it to
		// the cosines added up one by one).
		vec = signal{top: vecAll, n: len(vecAll), sum: ix.CosineSum(qvec, q.Server)}
	}
	var hits []Hit
	for _, r := range e.rank(mode, kw, vec, limit) {
		t, _ := ix.Tool(r.id)
		hits = append(hits, Hit{Tool: t, Score: r.score, Keyword: r.keyword, Vector: r.vector, BM25: r.bm25, Cosine: r.cosine})
	}
	return Result{Hits: hits, Mode: mode}, nil
}
