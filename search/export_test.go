package search

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/index"
)

// SearchWhole ranks q the way Search did before it pruned: both signals
// fetched for the whole (server-filtered) catalog, every candidate's score
// read from those lists, the mean cosine summed over all of them. It is the
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
	if mode.needsVectors() {
		vecs, err := e.emb.Embed(ctx, []string{text})
		if err != nil {
			return Result{}, err
		}
		vecAll = ix.Nearest(vecs[0], n, q.Server)
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
		// Rows are in ID order; the engine adds cosines up in row order.
		byID := slices.Clone(vecAll)
		slices.SortFunc(byID, func(a, b index.Scored) int { return strings.Compare(a.ID, b.ID) })
		vec = signal{top: vecAll, n: len(vecAll)}
		for _, h := range byID {
			vec.sum += h.Score
		}
	}
	var hits []Hit
	for _, r := range e.rank(mode, kw, vec, limit) {
		t, _ := ix.Tool(r.id)
		hits = append(hits, Hit{Tool: t, Score: r.score, Keyword: r.keyword, Vector: r.vector, BM25: r.bm25, Cosine: r.cosine})
	}
	return Result{Hits: hits, Mode: mode}, nil
}
