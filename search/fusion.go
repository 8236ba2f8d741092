package search

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/index"
)

// Tuning notes (toolgate eval, weights fixed at 0.4/0.6, all-MiniLM-L6-v2
// fp32; Hit@1 / nDCG@10 in %, azure-mcp then metatool):
//
//	keyword max,    cosine raw:    78.9/90.7  49.0/64.6  (vector alone on metatool: 50.5/64.8)
//	keyword max,    cosine minmax: 78.0/90.3  53.1/67.8  (pool 10: 75.4/88.8 53.9/68.2 — pool-sensitive)
//	keyword max,    cosine max:    79.3/90.9  53.4/68.0  ← default; same for pools of 10, 30, 100
//	keyword minmax, any cosine:    within 0.5 of keyword max
//	bm25 / vector / rrf alone:     71.1/87.3 60.8/80.7 75.9/89.1 — 44.1/56.7 50.5/64.8 52.8/65.7
//
// Raw cosines of MiniLM top out around 0.5–0.7 while the normalised keyword
// score tops at 1, so with raw cosine the 0.6 vector weight weighs less than
// the 0.4 keyword weight. Dividing the cosine by the query's best cosine puts
// both on one scale; min-max over the pool does too but depends on the pool.

// Norm says how a signal's raw scores are mapped before fusion.
type Norm string

const (
	// NormMax divides by the best score of the query (over the whole
	// catalog), negatives counting as 0: the top hit gets 1, a keyword
	// non-match 0. The default for both signals.
	NormMax Norm = "max"
	// NormMinMax maps the candidate pool's lowest score to 0 and its
	// highest to 1.
	NormMinMax Norm = "minmax"
	// NormRaw uses the score as it is (for cosine: [-1,1], in practice
	// about [-0.2,0.9] with MiniLM).
	NormRaw Norm = "raw"
	// NormClamp uses the score as it is, negative values raised to 0.
	NormClamp Norm = "clamp"
)

// ParseNorm checks a normalisation name; "" means the default.
func ParseNorm(s string) (Norm, error) {
	switch n := Norm(s); n {
	case "", NormMax, NormMinMax, NormRaw, NormClamp:
		return n, nil
	}
	return "", fmt.Errorf("unknown normalisation %q: want max, minmax, raw or clamp", s)
}

// ranked is one fused candidate before it becomes a Hit.
type ranked struct {
	id                     string
	score, keyword, vector float64
	bm25, cosine           float64
}

// rank fuses the two full score lists (each sorted best first; vec is nil
// when the vector signal is off) into the top limit hits of mode.
func (e *Engine) rank(mode Mode, kw, vec []index.Scored, limit int) []ranked {
	o := e.opts
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
		for i, s := range kw[:min(pool, len(kw))] {
			add(s.ID)
			kwRank[s.ID] = i + 1
		}
	}
	if mode != ModeBM25 {
		for i, s := range vec[:min(pool, len(vec))] {
			add(s.ID)
			vecRank[s.ID] = i + 1
		}
	}
	if len(cands) == 0 {
		return nil
	}

	// Exact scores of every candidate in both signals: a candidate absent
	// from the keyword list matches no query term, so its BM25 is 0.
	rawKW := make(map[string]float64, len(kw))
	for _, s := range kw {
		if _, ok := byID[s.ID]; ok {
			rawKW[s.ID] = s.Score
		}
	}
	rawVec := make(map[string]float64, len(cands))
	for _, s := range vec {
		if _, ok := byID[s.ID]; ok {
			rawVec[s.ID] = s.Score
		}
	}
	var kwMax float64
	if len(kw) > 0 {
		kwMax = kw[0].Score
	}
	kwN := normalise(o.KeywordNorm, cands, rawKW, kwMax)
	var vecN map[string]float64
	if vec != nil {
		var vecMax float64
		if len(vec) > 0 {
			vecMax = vec[0].Score
		}
		vecN = normalise(o.VectorNorm, cands, rawVec, vecMax)
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
	slices.SortStableFunc(cands, func(a, b *ranked) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	out := make([]ranked, 0, min(limit, len(cands)))
	for _, c := range cands[:min(limit, len(cands))] {
		out = append(out, *c)
	}
	return out
}

// normalise maps the candidates' raw scores with n. best is the top score
// of the whole list (for NormMax).
func normalise(n Norm, cands []*ranked, raw map[string]float64, best float64) map[string]float64 {
	out := make(map[string]float64, len(cands))
	switch n {
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
