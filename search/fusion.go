package search

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/index"
)

// Tuning notes (toolgate eval, weights fixed at 0.4/0.6, all-MiniLM-L6-v2
// fp32, index document text of d5fff63; Hit@1 / nDCG@10 in %):
//
//	                                  azure-mcp   metatool
//	bm25 alone                        71.1/87.3   44.1/56.7
//	vector alone                      80.6/91.2   50.5/64.8
//	rrf (k=60)                        81.5/92.0   52.8/65.7
//	hybrid, keyword max, cosine raw   79.7/91.5   49.0/64.6  (clamp: same)
//	hybrid, keyword max, cosine minmax 82.3/92.5  53.1/67.8  (pool 10: 82.8/92.7 53.9/68.2: pool-sensitive)
//	hybrid, keyword max, cosine max   82.8/92.6   53.4/68.0  (pools 10–100: same)
//	hybrid, keyword max, cosine mean  83.2/92.8   54.5/68.6  ← default (pool-independent)
//	hybrid, keyword mean, cosine mean 83.6/92.9   54.4/68.5
//	hybrid, keyword minmax, any       within 0.5 of keyword max
//
// With the raw cosine, the vector half was worth less than its 0.6 weight:
// MiniLM cosines of unrelated tools sit well above 0 and the best rarely
// passes 0.7, while the normalised keyword score tops at 1. Shifting by the
// catalog's mean cosine and dividing by the best's distance from it gives
// both signals the same 0–1 span (it equals z-score normalisation clipped at
// 0 and divided by the best z). Before d5fff63 (document text with
// parameters) the same ordering held: raw 78.9/90.7 49.0/64.6, max
// 79.3/90.9 53.4/68.0.

// The weights. With each tool's vector the mean of its views (index format
// 5; see catalog.Views), the vector half is worth more than before, and the
// default moved from 0.4/0.6 to 0.3/0.7. Chosen by 2-fold cross-validation
// over both dev splits at once (the halves of scripts/split-queries.py):
// each half picks 0.3 (by the mean of azure-mcp and metatool Hit@1), and
// the other half then scores (Hit@1, half a / half b):
//
//	keyword weight    0.25        0.3         0.35        0.4         0.45
//	azure-mcp         89.3/90.1   90.1/91.0   90.1/90.1   90.1/90.1   90.9/89.2
//	metatool          56.9/58.0   56.9/57.9   56.8/57.8   56.3/56.8   55.3/56.3
//
// Adding the IDF coverage of the query as a third term (0.1–0.2) moved
// either split by at most half a point; a listwise logistic fusion of up to
// eight features (normalised and raw BM25F and cosines, per-view cosines,
// coverage, reciprocal ranks), fitted on both splits' one half and
// measured on the other, gained at most 1 point on metatool and nothing on
// azure-mcp over the fixed weights: not worth its free parameters.

// Norm says how a signal's raw scores are mapped before fusion.
type Norm string

const (
	// NormMax divides by the best score of the query (over the whole
	// catalog), negatives counting as 0: the top hit gets 1, a keyword
	// non-match 0. The default for the keyword signal (Options.KeywordNorm).
	NormMax Norm = "max"
	// NormMinMax maps the candidate pool's lowest score to 0 and its
	// highest to 1.
	NormMinMax Norm = "minmax"
	// NormMean subtracts the mean score over the catalog searched, then
	// divides by the best score minus the mean, below-mean scores as 0:
	// "how far above the typical tool, as a fraction of the best". The
	// default for the vector signal (Options.VectorNorm).
	NormMean Norm = "mean"
	// NormRaw uses the score as it is (for cosine: [-1,1], in practice
	// about [-0.2,0.9] with MiniLM).
	NormRaw Norm = "raw"
	// NormClamp uses the score as it is, negative values raised to 0.
	NormClamp Norm = "clamp"
)

// ParseNorm checks a normalisation name; "" means the default.
func ParseNorm(s string) (Norm, error) {
	switch n := Norm(s); n {
	case "", NormMax, NormMean, NormMinMax, NormRaw, NormClamp:
		return n, nil
	}
	return "", fmt.Errorf("unknown normalisation %q: want max, mean, minmax, raw or clamp", s)
}

// ranked is one fused candidate before it becomes a Hit.
type ranked struct {
	id                     string
	score, keyword, vector float64
	bm25, cosine           float64
	exact                  bool // the query names the tool: it ranks first
	// clause is the part of the query the scores are for (steps.go); ""
	// for the whole query.
	clause string
}

// signal is what one half of the index says about a query.
type signal struct {
	// top is the signal's best hits, best first, exactly as the head of
	// the whole catalog's ranking (ties in ID order), at least the pool
	// deep or all there are.
	top []index.Scored
	// extra holds the exact raw scores of candidates missing from top; a
	// candidate in neither scores 0 (for keywords: it matches no term).
	extra map[string]float64
	// sum is the raw scores' sum over the catalog searched, and n that
	// catalog's size: NormMean's mean is sum/n.
	sum float64
	n   int
}

// rank fuses the two signals (vec.top is nil when the vector signal is off)
// into the top limit hits of mode.
func (e *Engine) rank(mode Mode, kw, vec signal, limit int) []ranked {
	return e.rankExact(mode, kw, vec, limit, nil)
}

// rankExact is rank with the tools the query names (exact, IDs whose
// scores kw and vec hold) first, in score order among themselves.
func (e *Engine) rankExact(mode Mode, kw, vec signal, limit int, exact []string) []ranked {
	cands := e.fuse(mode, kw, vec, limit, exact)
	slices.SortStableFunc(cands, func(a, b *ranked) int { return compareRanked(*a, *b) })
	out := make([]ranked, 0, min(limit, len(cands)))
	for _, c := range cands[:min(limit, len(cands))] {
		out = append(out, *c)
	}
	return out
}

// compareRanked orders hits best first: the tools the query names, then
// by score, ties by ID.
func compareRanked(a, b ranked) int {
	if a.exact != b.exact {
		if a.exact {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// fuse scores every candidate of mode's pool and the exact ones, in
// first-seen order.
func (e *Engine) fuse(mode Mode, kw, vec signal, limit int, exact []string) []*ranked {
	o := e.options()
	pool := o.Candidates
	if mode == ModeBM25 || mode == ModeVector {
		// A single signal needs no pool: its own top-limit is the answer.
		pool = limit
	}

	// Candidate pool: the union of each signal's top-N, in first-seen order.
	byID := make(map[string]*ranked, 2*pool)
	var cands []*ranked
	add := func(id string) *ranked {
		if c, ok := byID[id]; ok {
			return c
		}
		c := &ranked{id: id}
		byID[id] = c
		cands = append(cands, c)
		return c
	}
	kwRank := map[string]int{}
	vecRank := map[string]int{}
	if mode != ModeVector {
		for i, s := range kw.top[:min(pool, len(kw.top))] {
			add(s.ID)
			kwRank[s.ID] = i + 1
		}
	}
	if mode != ModeBM25 {
		for i, s := range vec.top[:min(pool, len(vec.top))] {
			add(s.ID)
			vecRank[s.ID] = i + 1
		}
	}
	for _, id := range exact {
		add(id).exact = true
	}
	if len(cands) == 0 {
		return nil
	}

	// Exact scores of every candidate in both signals.
	rawKW := kw.raw(byID)
	rawVec := vec.raw(byID)
	kwN := normalise(o.KeywordNorm, cands, rawKW, kw)
	var vecN map[string]float64
	if vec.top != nil {
		vecN = normalise(o.VectorNorm, cands, rawVec, vec)
	}

	for _, c := range cands {
		c.keyword = kwN[c.id]
		c.vector = vecN[c.id]
		c.bm25 = rawKW[c.id]
		c.cosine = rawVec[c.id]
		switch mode {
		case ModeBM25:
			c.score = c.keyword
		case ModeVector:
			c.score = rawVec[c.id]
		case ModeHybrid:
			c.score = o.KeywordWeight*c.keyword + o.VectorWeight*c.vector
		case ModeRRF:
			if r, ok := kwRank[c.id]; ok {
				c.score += 1 / (o.RRFK + float64(r))
			}
			if r, ok := vecRank[c.id]; ok {
				c.score += 1 / (o.RRFK + float64(r))
			}
		}
	}
	return cands
}

// raw is the signal's raw score of each candidate (absent: 0).
func (s signal) raw(cands map[string]*ranked) map[string]float64 {
	out := make(map[string]float64, len(cands))
	for _, h := range s.top {
		if _, ok := cands[h.ID]; ok {
			out[h.ID] = h.Score
		}
	}
	for id, v := range s.extra {
		if _, ok := cands[id]; ok {
			out[id] = v
		}
	}
	return out
}

// normalise maps the candidates' raw scores with n, given the signal over
// the catalog searched.
func normalise(n Norm, cands []*ranked, raw map[string]float64, sig signal) map[string]float64 {
	out := make(map[string]float64, len(cands))
	var best float64
	if len(sig.top) > 0 {
		best = sig.top[0].Score
	}
	switch n {
	case NormMean:
		mean := sig.sum / float64(max(sig.n, 1))
		if best > mean {
			for _, c := range cands {
				out[c.id] = max(raw[c.id]-mean, 0) / (best - mean)
			}
			break
		}
		fallthrough // one tool, or all equal: nothing stands out
	case NormMax:
		if best > 0 {
			for _, c := range cands {
				out[c.id] = max(raw[c.id], 0) / best
			}
		}
	case NormMinMax:
		lo, hi := raw[cands[0].id], raw[cands[0].id]
		for _, c := range cands {
			lo, hi = min(lo, raw[c.id]), max(hi, raw[c.id])
		}
		if hi > lo {
			for _, c := range cands {
				out[c.id] = (raw[c.id] - lo) / (hi - lo)
			}
		}
	case NormClamp:
		for _, c := range cands {
			out[c.id] = max(raw[c.id], 0)
		}
	default: // NormRaw
		for _, c := range cands {
			out[c.id] = raw[c.id]
		}
	}
	return out
}
