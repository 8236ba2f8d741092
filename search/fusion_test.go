package search

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolgate/toolgate/index"
)

// wholeSignals makes the signals of two whole-catalog lists, best first
// (vec nil: the vector signal is off).
func wholeSignals(kw, vec []index.Scored) (signal, signal) {
	n := max(len(kw), len(vec))
	k := signal{top: kw, n: n}
	for _, s := range kw {
		k.sum += s.Score
	}
	v := signal{top: vec, n: n}
	for _, s := range vec {
		v.sum += s.Score
	}
	return k, v
}

func TestRank(t *testing.T) {
	// BM25 matches a, b, c (scores 8, 4, 2); cosines over the whole catalog.
	kw := []index.Scored{{ID: "a", Score: 8}, {ID: "b", Score: 4}, {ID: "c", Score: 2}}
	vec := []index.Scored{{ID: "d", Score: 0.9}, {ID: "b", Score: 0.7}, {ID: "a", Score: 0.2}, {ID: "c", Score: 0.1}, {ID: "e", Score: -0.1}}
	rawKW := map[string]float64{"a": 8, "b": 4, "c": 2}
	rawVec := map[string]float64{"a": 0.2, "b": 0.7, "c": 0.1, "d": 0.9, "e": -0.1}
	kwW, vW := DefaultKeywordWeight, DefaultVectorWeight
	tests := []struct {
		name string
		opts Options
		mode Mode
		want []ranked
	}{
		{
			name: "hybrid max/mean (default)",
			mode: ModeHybrid,
			// mean cosine over the 5 tools 0.36, best 0.9: (cos-0.36)/0.54.
			want: []ranked{
				{id: "d", keyword: 0, vector: 1, score: vW},
				{id: "b", keyword: 0.5, vector: 0.34 / 0.54, score: kwW*0.5 + vW*0.34/0.54},
				{id: "a", keyword: 1, vector: 0, score: kwW},
				{id: "c", keyword: 0.25, vector: 0, score: kwW * 0.25},
				{id: "e", keyword: 0, vector: 0, score: 0},
			},
		},
		{
			name: "hybrid max/max",
			opts: Options{VectorNorm: NormMax},
			mode: ModeHybrid,
			// cosine divided by the best (0.9), negatives as 0.
			want: []ranked{
				{id: "d", keyword: 0, vector: 1, score: vW},
				{id: "b", keyword: 0.5, vector: 0.7 / 0.9, score: kwW*0.5 + vW*0.7/0.9},
				{id: "a", keyword: 1, vector: 0.2 / 0.9, score: kwW + vW*0.2/0.9},
				{id: "c", keyword: 0.25, vector: 0.1 / 0.9, score: kwW*0.25 + vW*0.1/0.9},
				{id: "e", keyword: 0, vector: 0, score: 0},
			},
		},
		{
			name: "hybrid max/raw",
			opts: Options{VectorNorm: NormRaw},
			mode: ModeHybrid,
			want: []ranked{
				{id: "b", keyword: 0.5, vector: 0.7, score: kwW*0.5 + vW*0.7},
				{id: "d", keyword: 0, vector: 0.9, score: vW * 0.9},
				{id: "a", keyword: 1, vector: 0.2, score: kwW + vW*0.2},
				{id: "c", keyword: 0.25, vector: 0.1, score: kwW*0.25 + vW*0.1},
				{id: "e", keyword: 0, vector: -0.1, score: vW * -0.1},
			},
		},
		{
			name: "hybrid pool of 1",
			opts: Options{Candidates: 1, VectorNorm: NormRaw},
			mode: ModeHybrid,
			want: []ranked{
				{id: "d", keyword: 0, vector: 0.9, score: vW * 0.9},
				{id: "a", keyword: 1, vector: 0.2, score: kwW + vW*0.2},
			},
		},
		{
			name: "hybrid minmax/minmax",
			opts: Options{KeywordNorm: NormMinMax, VectorNorm: NormMinMax},
			mode: ModeHybrid,
			// pool {a,b,c,d,e}: keyword 0..8, cosine -0.1..0.9.
			want: []ranked{
				{id: "b", keyword: 0.5, vector: 0.8, score: kwW*0.5 + vW*0.8},
				{id: "d", keyword: 0, vector: 1, score: vW},
				{id: "a", keyword: 1, vector: 0.3, score: kwW + vW*0.3},
				{id: "c", keyword: 0.25, vector: 0.2, score: kwW*0.25 + vW*0.2},
				{id: "e", keyword: 0, vector: 0, score: 0},
			},
		},
		{
			name: "hybrid clamp",
			opts: Options{VectorNorm: NormClamp},
			mode: ModeHybrid,
			want: []ranked{
				{id: "b", keyword: 0.5, vector: 0.7, score: kwW*0.5 + vW*0.7},
				{id: "d", keyword: 0, vector: 0.9, score: vW * 0.9},
				{id: "a", keyword: 1, vector: 0.2, score: kwW + vW*0.2},
				{id: "c", keyword: 0.25, vector: 0.1, score: kwW*0.25 + vW*0.1},
				{id: "e", keyword: 0, vector: 0, score: 0},
			},
		},
		{
			name: "rrf",
			opts: Options{VectorNorm: NormRaw},
			mode: ModeRRF,
			want: []ranked{
				{id: "a", keyword: 1, vector: 0.2, score: 1.0/61 + 1.0/63},
				{id: "b", keyword: 0.5, vector: 0.7, score: 1.0/62 + 1.0/62},
				{id: "c", keyword: 0.25, vector: 0.1, score: 1.0/63 + 1.0/64},
				{id: "d", keyword: 0, vector: 0.9, score: 1.0 / 61},
				{id: "e", keyword: 0, vector: -0.1, score: 1.0 / 65},
			},
		},
		{
			name: "bm25",
			opts: Options{VectorNorm: NormMax},
			mode: ModeBM25,
			want: []ranked{
				{id: "a", keyword: 1, vector: 0.2 / 0.9, score: 1},
				{id: "b", keyword: 0.5, vector: 0.7 / 0.9, score: 0.5},
				{id: "c", keyword: 0.25, vector: 0.1 / 0.9, score: 0.25},
			},
		},
		{
			name: "vector",
			opts: Options{VectorNorm: NormRaw},
			mode: ModeVector,
			want: []ranked{
				{id: "d", vector: 0.9, score: 0.9},
				{id: "b", keyword: 0.5, vector: 0.7, score: 0.7},
				{id: "a", keyword: 1, vector: 0.2, score: 0.2},
				{id: "c", keyword: 0.25, vector: 0.1, score: 0.1},
				{id: "e", vector: -0.1, score: -0.1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Engine{}
			o := (&tt.opts).withDefaults()
			e.opts.Store(&o)
			kwSig, vecSig := wholeSignals(kw, vec)
			got := e.rank(tt.mode, kwSig, vecSig, 10)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(ranked{}), cmpopts.IgnoreFields(ranked{}, "bm25", "cosine"), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("rank (-want +got):\n%s", diff)
			}
			// The raw signals ride along unchanged.
			for _, r := range got {
				if r.bm25 != rawKW[r.id] || r.cosine != rawVec[r.id] {
					t.Errorf("%s: bm25 %v cosine %v, want %v %v", r.id, r.bm25, r.cosine, rawKW[r.id], rawVec[r.id])
				}
			}
		})
	}
}
