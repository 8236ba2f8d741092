package index

import (
	"container/heap"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Nearest returns the k tools whose vectors have the highest dot product with
// vec (the cosine similarity, as both are unit length), best first. It scans
// every row: at tens of thousands of tools an exact scan takes a few
// milliseconds and needs no approximate index. server "" searches all
// servers. Without vectors, or with a vector of the wrong size, it returns nil.
func (ix *Index) Nearest(vec []float32, k int, server string) []Scored {
	if ix.vecs == nil || len(vec) != ix.dim || k <= 0 {
		return nil
	}
	dim := ix.dim
	if k >= len(ix.tools) {
		return ix.scoreAll(vec, server)
	}
	h := make(scoredHeap, 0, k+1)
	for i := range ix.tools {
		if server != "" && ix.tools[i].Server != server {
			continue
		}
		row := ix.vecs[i*dim : (i+1)*dim : (i+1)*dim]
		s := float64(dot(row, vec))
		if len(h) < k {
			heap.Push(&h, hrow{i, s})
		} else if s > h[0].score || (s == h[0].score && i < h[0].row) {
			h[0] = hrow{i, s}
			heap.Fix(&h, 0)
		}
	}
	return ix.sortedRows(h)
}

// scoreAll is Nearest for k ≥ the catalog (what hybrid search asks for):
// every row is scored and the rows sorted once, without the heap.
func (ix *Index) scoreAll(vec []float32, server string) []Scored {
	dim := ix.dim
	rows := make([]hrow, 0, len(ix.tools))
	for i := range ix.tools {
		if server != "" && ix.tools[i].Server != server {
			continue
		}
		rows = append(rows, hrow{i, float64(dot(ix.vecs[i*dim:(i+1)*dim:(i+1)*dim], vec))})
	}
	return ix.sortedRows(rows)
}

// VectorScan is the vector half of one query over the catalog searched
// (all tools, or one server's): its best hits, and the sum and count of
// every tool's cosine, which give the catalog's mean cosine.
type VectorScan struct {
	Top []Scored // the k best, best first; equal scores in ID order
	Sum float64  // the sum of every scored tool's cosine (CosineSum)
	N   int      // how many tools were scored
}

// Scan scores every tool of server ("" = all) against vec, like Nearest,
// and keeps only the k best, plus the sum of all the scores. Its Top equals
// Nearest(vec, k, server). Without vectors, or with a vector of the wrong
// size, it returns the zero VectorScan.
//
// A scan of the exact rows is bound by memory bandwidth (10,000 tools are
// 15 MB), so it reads a bfloat16 copy first, half the bytes, whose dot
// products are within a proven bound (vectorStats.slack) of the exact ones.
// Only the rows that bound cannot rule out of the top k are scored again
// exactly, in row order, so Top is bit for bit Nearest's. The dot products
// are split among the cores (a single search otherwise leaves the second
// core idle once its query is embedded); the result does not depend on the
// split.
func (ix *Index) Scan(vec []float32, k int, server string) VectorScan {
	if ix.vecs == nil || len(vec) != ix.dim || k <= 0 {
		return VectorScan{}
	}
	st := ix.vectorStats()
	out := VectorScan{Sum: ix.CosineSum(vec, server), N: st.count[server]}
	rows := len(ix.tools)
	bp, _ := ix.scanBufs.Get().(*[]float32)
	if bp == nil || cap(*bp) < rows {
		b := make([]float32, rows)
		bp = &b
	}
	scores := (*bp)[:rows]
	defer ix.scanBufs.Put(bp)

	inServer := func(i int) bool { return server == "" || ix.tools[i].Server == server }
	h := make(scoredHeap, 0, min(k, rows)+1)
	keep := func(i int, s float64) {
		if len(h) < k {
			heap.Push(&h, hrow{i, s})
		} else if s > h[0].score {
			// Rows come in ascending order, so an equal score is a later
			// row: worse than the heap's worst, never kept.
			h[0] = hrow{i, s}
			heap.Fix(&h, 0)
		}
	}
	if st.bf16 == nil {
		ix.split(rows, func(lo, hi int) { ix.dots(vec, server, scores, lo, hi) })
		for i, f := range scores {
			if inServer(i) {
				keep(i, float64(f))
			}
		}
		out.Top = ix.sortedRows(h)
		return out
	}
	ix.split(rows, func(lo, hi int) { st.approxDots(vec, server, ix.tools, scores, lo, hi) })
	// Every row whose exact score reaches the k-th best exact score has
	// an approximate one of at least the k-th best approximate score
	// minus twice the slack.
	floor := math.Inf(-1)
	if out.N > k {
		floor = float64(kthLargest(scores, inServer, k)) - 2*st.slack(vec)
	}
	dim := ix.dim
	for i, f := range scores {
		if float64(f) >= floor && inServer(i) {
			keep(i, float64(dot(ix.vecs[i*dim:(i+1)*dim:(i+1)*dim], vec)))
		}
	}
	out.Top = ix.sortedRows(h)
	return out
}

// split runs fn over [0, rows) in one contiguous part per core, or in one
// call when the rows are too few to be worth a goroutine.
func (ix *Index) split(rows int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), rows/scanChunk)
	if workers <= 1 {
		fn(0, rows)
		return
	}
	var wg sync.WaitGroup
	per := (rows + workers - 1) / workers
	for lo := per; lo < rows; lo += per {
		wg.Go(func() { fn(lo, min(lo+per, rows)) })
	}
	fn(0, per)
	wg.Wait()
}

// kthLargest returns the k-th largest of the scores whose row is in, for k
// at most their number.
func kthLargest(scores []float32, in func(int) bool, k int) float32 {
	h := make([]float32, 0, k) // min-heap of the k largest so far
	for i, s := range scores {
		if !in(i) {
			continue
		}
		if len(h) < k {
			h = append(h, s)
			for j := len(h) - 1; j > 0; { // sift up
				p := (j - 1) / 2
				if h[p] <= h[j] {
					break
				}
				h[p], h[j] = h[j], h[p]
				j = p
			}
			continue
		}
		if s <= h[0] {
			continue
		}
		h[0] = s
		for j := 0; ; { // sift down
			c := 2*j + 1
			if c >= len(h) {
				break
			}
			if c+1 < len(h) && h[c+1] < h[c] {
				c++
			}
			if h[j] <= h[c] {
				break
			}
			h[j], h[c] = h[c], h[j]
			j = c
		}
	}
	return h[0]
}

// CosineSum is the sum of the cosines of vec with every tool of server
// ("" = all): vec's dot product with the sum of those tools' vectors, in
// float64 (the same sum as adding up each tool's cosine, rounded once
// instead of once a tool). NormMean's mean cosine is CosineSum / N.
func (ix *Index) CosineSum(vec []float32, server string) float64 {
	if ix.vecs == nil || len(vec) != ix.dim {
		return 0
	}
	sum := ix.vectorStats().sum[server]
	var s float64
	for j, c := range sum {
		s += float64(vec[j]) * c
	}
	return s
}

// vectorStats is what Scan derives from the rows once: the bfloat16 copy,
// the largest row norm (for the bound) and each server's vector sum.
type vectorStats struct {
	dim     int
	bf16    []uint16 // each value's high 16 bits, rounded to nearest even; nil: not usable
	maxNorm float64
	sum     map[string][]float64 // server ("" = all) → sum of its rows
	count   map[string]int
}

func (ix *Index) vectorStats() *vectorStats {
	ix.statsOnce.Do(func() { ix.stats = newVectorStats(ix.tools, ix.vecs, ix.dim) })
	return ix.stats
}

func newVectorStats(tools []Tool, vecs []float32, dim int) *vectorStats {
	st := &vectorStats{dim: dim, sum: map[string][]float64{}, count: map[string]int{}}
	all := make([]float64, dim)
	st.sum[""] = all
	st.count[""] = len(tools)
	usable := dim%8 == 0
	for i, t := range tools {
		row := vecs[i*dim : (i+1)*dim]
		srv := st.sum[t.Server]
		if srv == nil {
			srv = make([]float64, dim)
			st.sum[t.Server] = srv
		}
		st.count[t.Server]++
		var norm float64
		for j, v := range row {
			f := float64(v)
			all[j] += f
			srv[j] += f
			norm += f * f
			// bfloat16 keeps float32's exponent range, so only values
			// that are not finite or could round to infinity are unusable.
			if math.IsNaN(f) || math.Abs(f) > 1e38 {
				usable = false
			}
		}
		st.maxNorm = max(st.maxNorm, math.Sqrt(norm))
	}
	if usable {
		st.bf16 = make([]uint16, len(vecs))
		for i, v := range vecs {
			st.bf16[i] = toBF16(v)
		}
	}
	return st
}

// toBF16 rounds v to bfloat16 (nearest, ties to even) for a finite v below
// bfloat16's largest value.
func toBF16(v float32) uint16 {
	b := math.Float32bits(v)
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// slack bounds |approximate − exact| for any row, where exact is dot (the
// float32 dot product Nearest ranks by) and approximate is the float32 dot
// product with the row rounded to bfloat16. Rounding a value to bfloat16
// moves it by at most 2⁻⁸ of itself (2⁻¹³⁴ for float32 subnormals), so the
// exact products move by at most 2⁻⁸·‖q‖·‖row‖ + 2⁻¹³⁴·‖q‖₁ (Cauchy–Schwarz);
// each float32 sum of dim products is within γ = (dim+1)·2⁻²⁴/(1−(dim+1)·2⁻²⁴)
// of its products' absolute sum, for either one. A 1 % margin covers the
// rounding of the bound itself.
func (st *vectorStats) slack(q []float32) float64 {
	var n2, n1 float64
	for _, v := range q {
		n2 += float64(v) * float64(v)
		n1 += math.Abs(float64(v))
	}
	qn := math.Sqrt(n2)
	u := math.Ldexp(1, -24)
	gamma := float64(st.dim+1) * u / (1 - float64(st.dim+1)*u)
	rel := math.Ldexp(1, -8)
	bound := rel*qn*st.maxNorm + math.Ldexp(1, -134)*n1 + gamma*qn*st.maxNorm*(2+rel)
	return bound * 1.01
}

// approxDots writes the bfloat16 dot product of vec with rows lo to hi of
// server ("" = all) into scores; other servers' rows are left as they were.
func (st *vectorStats) approxDots(vec []float32, server string, tools []Tool, scores []float32, lo, hi int) {
	dim := st.dim
	i := lo
	var out [4]float32
	for ; i+4 <= hi; i += 4 {
		if server != "" && (tools[i].Server != server || tools[i+1].Server != server ||
			tools[i+2].Server != server || tools[i+3].Server != server) {
			for j := i; j < i+4; j++ {
				if tools[j].Server == server {
					scores[j] = dotBF16(st.bf16[j*dim:(j+1)*dim:(j+1)*dim], vec)
				}
			}
			continue
		}
		dotRows4BF16(st.bf16[i*dim:(i+4)*dim], dim, vec[:dim], &out)
		copy(scores[i:i+4], out[:])
	}
	for ; i < hi; i++ {
		if server == "" || tools[i].Server == server {
			scores[i] = dotBF16(st.bf16[i*dim:(i+1)*dim:(i+1)*dim], vec)
		}
	}
}

// dotBF16 is the dot product of a bfloat16 row with q (the order of the
// additions is free: slack bounds any order).
func dotBF16(row []uint16, q []float32) float32 {
	q = q[:len(row)]
	var s float32
	for i, h := range row {
		s += math.Float32frombits(uint32(h)<<16) * q[i]
	}
	return s
}

// scanChunk is the fewest rows worth a goroutine of their own in Scan.
const scanChunk = 4096

// dots writes the dot product of vec with rows lo to hi of server ("" =
// all) into scores; other servers' rows are left as they were.
func (ix *Index) dots(vec []float32, server string, scores []float32, lo, hi int) {
	dim := ix.dim
	i := lo
	if haveDotRows4 && dim%4 == 0 {
		// Four rows at a time, unless one of them is another server's:
		// BenchmarkDot vs BenchmarkDotRows4, about 330 vs 50 ns a row
		// from cache, so a large scan is bound by memory bandwidth.
		var out [4]float32
		for ; i+4 <= hi; i += 4 {
			if server != "" && (ix.tools[i].Server != server || ix.tools[i+1].Server != server ||
				ix.tools[i+2].Server != server || ix.tools[i+3].Server != server) {
				for j := i; j < i+4; j++ {
					if ix.tools[j].Server == server {
						scores[j] = dot(ix.vecs[j*dim:(j+1)*dim:(j+1)*dim], vec)
					}
				}
				continue
			}
			dotRows4(ix.vecs[i*dim:(i+4)*dim], dim, vec[:dim], &out)
			copy(scores[i:i+4], out[:])
		}
	}
	for ; i < hi; i++ {
		if server != "" && ix.tools[i].Server != server {
			continue
		}
		scores[i] = dot(ix.vecs[i*dim:(i+1)*dim:(i+1)*dim], vec)
	}
}

// Cosine is the dot product of vec with the vector of tool id (its cosine
// similarity), exactly as Nearest and Scan compute it.
func (ix *Index) Cosine(vec []float32, id string) (float64, bool) {
	i, ok := ix.byID[id]
	if !ok || ix.vecs == nil || len(vec) != ix.dim {
		return 0, false
	}
	return float64(dot(ix.vecs[i*ix.dim:(i+1)*ix.dim:(i+1)*ix.dim], vec)), true
}

// sortedRows orders heap rows best first (equal scores by row, i.e. ID) and
// names them.
func (ix *Index) sortedRows(h []hrow) []Scored {
	slices.SortFunc(h, func(a, b hrow) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return a.row - b.row
	})
	out := make([]Scored, len(h))
	for j, r := range h {
		out[j] = Scored{ID: ix.idAt(r.row), Score: r.score}
	}
	return out
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

type hrow struct {
	row   int
	score float64
}

// scoredHeap is a min-heap on score (worst kept result on top; ties: the
// later row is worse, so results are deterministic).
type scoredHeap []hrow

func (h scoredHeap) Len() int { return len(h) }
func (h scoredHeap) Less(a, b int) bool {
	if h[a].score != h[b].score {
		return h[a].score < h[b].score
	}
	return h[a].row > h[b].row
}
func (h scoredHeap) Swap(a, b int)       { h[a], h[b] = h[b], h[a] }
func (h *scoredHeap) Push(x interface{}) { *h = append(*h, x.(hrow)) }
func (h *scoredHeap) Pop() interface{} {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
