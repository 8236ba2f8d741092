package search

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/index"
)

// SpaceLearnedRebuilds sets the least spacing of the learned model's
// rebuilds (learnRebuildMin) until the returned func restores it.
func SpaceLearnedRebuilds(d time.Duration) (restore func()) {
	was := learnRebuildMin
	learnRebuildMin = d
	return func() { learnRebuildMin = was }
}

// WaitFirstLearned sets how long the first searches of an index wait for
// its learned model (firstLearnedWait) until the returned func restores it.
func WaitFirstLearned(d time.Duration) (restore func()) {
	was := firstLearnedWait
	firstLearnedWait = d
	return func() { firstLearnedWait = was }
}

// SearchWhole ranks q the way Search did before it pruned: both signals
// fetched for the whole (server-filtered) catalog, every candidate's score
// read from those lists, the mean cosine over all of them. A Filter is
// applied to those whole lists afterwards (the tools it drops taken out,
// the mean over the tools it keeps). It is the reference
// TestPrunedMatchesWhole holds Search to; it does not run the embedder
// concurrently and it never degrades.
func (e *Engine) SearchWhole(ctx context.Context, q Query) (Result, error) {
	mode := q.Mode
	if mode == "" {
		mode = e.options().Mode
	}
	limit := q.limit()
	s := e.acquire()
	defer s.release(e.log)
	ix := s.ix
	text := strings.TrimSpace(q.Text)
	asked, toEmbed := queryTexts(text) // as Search ranks it
	n := ix.Len()

	lm := e.learnedFor(ctx, ix)
	var extra *index.ExtraField
	if lm != nil {
		extra = lm.extra
	}
	sub := ix.In(q.Filter)
	dropped := func(s index.Scored) bool { return !sub.Has(s.ID) }
	kwRes, err := ix.KeywordAll(asked, q.Server, extra)
	if err != nil {
		return Result{}, err
	}
	kwAll := slices.DeleteFunc(kwRes.Top(n), dropped)
	var vecAll []index.Scored
	var qvec []float32
	if mode.NeedsVectors() {
		vecs, err := e.emb.Embed(ctx, []string{index.QueryPrefix(e.emb) + toEmbed})
		if err != nil {
			return Result{}, err
		}
		qvec = lm.query(vecs[0])
		vecAll = ix.Nearest(qvec, n, q.Server)
		if vecAll == nil {
			return Result{}, fmt.Errorf("no vectors")
		}
		vecAll = slices.DeleteFunc(vecAll, dropped)
		// Learned tools rank by their blended vectors.
		for i, s := range vecAll {
			if c, ok := lm.cosine(ix, qvec, s.ID); ok {
				vecAll[i].Score = c
			}
		}
		slices.SortStableFunc(vecAll, func(a, b index.Scored) int {
			if a.Score != b.Score {
				if a.Score > b.Score {
					return -1
				}
				return 1
			}
			return strings.Compare(a.ID, b.ID)
		})
	}
	kw := signal{top: kwAll}
	if !mode.NeedsVectors() {
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
		// The catalog's cosine sum, moved by the learned tools' blended
		// vectors (as Search does it, with the summed differences).
		sum := sub.CosineSum(qvec, q.Server)
		switch {
		case lm != nil && sub.Filtered():
			// The kept learned tools' differences, added one by one.
			var moved float64
			for i, id := range lm.ids {
				if (q.Server == "" || lm.servers[i] == q.Server) && sub.Has(id) {
					d, _ := ix.Cosine(qvec, id)
					moved += index.Dot(lm.blended[i], qvec) - d
				}
			}
			sum += moved
		case lm != nil && lm.delta[q.Server] != nil:
			sum += index.Dot(lm.delta[q.Server], qvec)
		}
		vec = signal{top: vecAll, n: len(vecAll), sum: sum}
	}
	// The tools the query names come first; the whole lists hold their
	// scores already.
	var exactIDs []string
	for _, row := range s.names.get(ix).match(text) {
		if t := ix.Tools()[row]; (q.Server == "" || t.Server == q.Server) && sub.Has(t.ID()) {
			exactIDs = append(exactIDs, t.ID())
		}
	}
	var hits []Hit
	for _, r := range e.rankExact(mode, kw, vec, limit, exactIDs) {
		t, _ := ix.Tool(r.id)
		hits = append(hits, Hit{Tool: t, Score: r.score, Keyword: r.keyword, Vector: r.vector, BM25: r.bm25, Cosine: r.cosine})
	}
	return Result{Hits: hits, Mode: mode}, nil
}

// SearchSlots is how many searches an Engine runs at once.
func SearchSlots() int { return searchSlots() }
