package index

import (
	"container/heap"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/index/catalog"
)

// Nearest returns the k tools whose vectors have the highest dot product with
// vec (the cosine similarity, as both are unit length), best first. It scans
// every row: at tens of thousands of tools an exact scan takes a few
// milliseconds and needs no approximate index. server "" searches all
// servers. Without vectors, with a vector of the wrong size, or once the
// index is closed, it returns nil.
func (ix *Index) Nearest(vec []float32, k int, server string) []Scored {
	return Subset{ix: ix}.Nearest(vec, k, server)
}

// Nearest is Index.Nearest over the subset's tools.
func (s Subset) Nearest(vec []float32, k int, server string) []Scored {
	ix, sc := s.ix, s.scope(server)
	if !ix.HasVectors() || len(vec) != ix.dim || k <= 0 {
		return nil
	}
	dim := ix.dim
	if k >= len(ix.tools) {
		return ix.scoreAll(vec, sc)
	}
	h := make(scoredHeap, 0, k+1)
	err := ix.eachRows(0, len(ix.tools), func(first int, rows []float32) {
		for r := range len(rows) / dim {
			i := first + r
			if !sc.has(ix.tools, i) {
				continue
			}
			s := float64(dot(rows[r*dim:(r+1)*dim:(r+1)*dim], vec))
			if len(h) < k {
				heap.Push(&h, hrow{i, s})
			} else if s > h[0].score || (s == h[0].score && i < h[0].row) {
				h[0] = hrow{i, s}
				heap.Fix(&h, 0)
			}
		}
	})
	if err != nil {
		return nil
	}
	return ix.sortedRows(h)
}

// scoreAll is Nearest for k ≥ the catalog (what hybrid search asks for):
// every row is scored and the rows sorted once, without the heap.
func (ix *Index) scoreAll(vec []float32, sc scope) []Scored {
	dim := ix.dim
	scored := make([]hrow, 0, len(ix.tools))
	err := ix.eachRows(0, len(ix.tools), func(first int, rows []float32) {
		for r := range len(rows) / dim {
			if i := first + r; sc.has(ix.tools, i) {
				scored = append(scored, hrow{i, float64(dot(rows[r*dim:(r+1)*dim:(r+1)*dim], vec))})
			}
		}
	})
	if err != nil {
		return nil
	}
	return ix.sortedRows(scored)
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
// Nearest(vec, k, server). Without vectors, with a vector of the wrong
// size, or once the index is closed, it returns the zero VectorScan.
//
// A scan of the exact rows is bound by memory bandwidth (10,000 tools are
// 15 MB), so once PrepareScan has made it, Scan reads an 8-bit copy first,
// a quarter of the bytes, whose dot products are within a proven bound
// (vectorCopy.slack) of the exact ones. Only the rows that bound cannot
// rule out of the top k are scored again exactly, in row order, so Top is
// bit for bit Nearest's either way. An index opened from disk reads its
// exact rows from the file (rows.go): there Scan never reads them all but
// waits for the 8-bit copy (PrepareScan, which an engine begins in the
// background when it gets the index), and reads only the rows it scores
// again. The dot products are split among the cores (a single search
// otherwise leaves the second core idle once its query is embedded); the
// result does not depend on the split.
func (ix *Index) Scan(vec []float32, k int, server string) VectorScan {
	return Subset{ix: ix}.Scan(vec, k, server)
}

// Scan is Index.Scan over the subset's tools: Top is the subset's Nearest,
// Sum and N those of the subset's tools (of server).
func (s Subset) Scan(vec []float32, k int, server string) VectorScan {
	ix, sc := s.ix, s.scope(server)
	if !ix.HasVectors() || len(vec) != ix.dim || k <= 0 {
		return VectorScan{}
	}
	sums := ix.vectorSums()
	if sums == nil { // closed
		return VectorScan{}
	}
	out := VectorScan{Sum: s.CosineSum(vec, server), N: sums.count[server]}
	if s.rows != nil {
		out.N = s.rows.count[server]
	}
	rows := len(ix.tools)
	bp, _ := ix.scanBufs.Get().(*[]float32)
	if bp == nil || cap(*bp) < rows {
		b := make([]float32, rows)
		bp = &b
	}
	scores := (*bp)[:rows]
	defer ix.scanBufs.Put(bp)

	inScope := func(i int) bool { return sc.has(ix.tools, i) }
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
	cp := ix.copy8.Load() // nil until PrepareScan has made it, or unusable
	if cp == nil && ix.vf != nil {
		ix.PrepareScan()
		cp = ix.copy8.Load()
	}
	if cp == nil {
		var failed atomic.Bool
		split(rows, scanChunk, func(lo, hi int) {
			if ix.dots(vec, sc, scores, lo, hi) != nil {
				failed.Store(true)
			}
		})
		if failed.Load() { // closed
			return VectorScan{}
		}
		for i, f := range scores {
			if inScope(i) {
				keep(i, float64(f))
			}
		}
		out.Top = ix.sortedRows(h)
		return out
	}
	q16, qscale := quantizeQuery(vec)
	split(rows, scanChunk, func(lo, hi int) { cp.approxDots(q16, qscale, sc, ix.tools, scores, lo, hi) })
	// Every row whose exact score reaches the k-th best exact score has
	// an approximate one of at least the k-th best approximate score
	// minus twice the slack.
	floor := math.Inf(-1)
	if out.N > k {
		floor = float64(kthLargest(scores, inScope, k)) - 2*cp.slack(vec, qscale)
	}
	var again []int32 // the rows to score again, ascending
	for i, f := range scores {
		if float64(f) >= floor && inScope(i) {
			again = append(again, int32(i))
		}
	}
	// Their exact scores replace the approximate ones, split among the
	// cores (from a file, each row is a read of its own), then are kept in
	// row order.
	var failed atomic.Bool
	split(len(again), rescoreChunk, func(lo, hi int) {
		rb := ix.rowBuf()
		defer ix.putRowBuf(rb)
		for _, i := range again[lo:hi] {
			row := ix.row(int(i), *rb)
			if row == nil {
				failed.Store(true)
				return
			}
			scores[i] = dot(row, vec)
		}
	})
	if failed.Load() { // closed
		return VectorScan{}
	}
	for _, i := range again {
		keep(int(i), float64(scores[i]))
	}
	out.Top = ix.sortedRows(h)
	return out
}

// split runs fn over [0, n) in one contiguous part per core, or in one
// call when n is under twice least, the fewest worth a goroutine.
func split(n, least int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/least)
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for lo := per; lo < n; lo += per {
		wg.Go(func() { fn(lo, min(lo+per, n)) })
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
// ("" = all), taken as vec's dot product with the sum of those tools'
// vectors, in float64: mathematically the same sum, it differs from adding
// up the float32 cosines only in rounding. NormMean's mean cosine is
// CosineSum / N.
func (ix *Index) CosineSum(vec []float32, server string) float64 {
	return Subset{ix: ix}.CosineSum(vec, server)
}

// CosineSum is Index.CosineSum over the subset's tools (of server).
func (s Subset) CosineSum(vec []float32, server string) float64 {
	ix := s.ix
	if !ix.HasVectors() || len(vec) != ix.dim {
		return 0
	}
	sums := ix.vectorSums()
	if sums == nil { // closed
		return 0
	}
	sum := sums.sum[server]
	if s.rows != nil {
		sum = s.rows.vectorSums(ix, sums)[server]
	}
	var total float64
	for j, c := range sum {
		total += float64(vec[j]) * c
	}
	return total
}

// vectorSums is each server's vector sum and row count ("" = all).
type vectorSums struct {
	sum   map[string][]float64
	count map[string]int
}

// vectorCopy is Scan's first pass: the rows in 8 bits and what the bound
// needs.
type vectorCopy struct {
	dim      int
	q8       []int8    // row r ≈ scale[r] · q8[r*dim:(r+1)*dim]
	scale    []float64 // per row: its largest |value| / 127
	maxScale float64
	maxNorm  float64
}

// vectorSums returns the index's vectorSums, made on first use; nil once
// the index is closed.
func (ix *Index) vectorSums() *vectorSums {
	ix.sumsOnce.Do(func() { ix.sums = newVectorSums(ix) })
	return ix.sums
}

// PrepareScan makes the 8-bit copy Scan reads first, and the server sums,
// if they are not made yet: each a pass over every row (BenchmarkVectorCopy,
// BenchmarkVectorSums). Until it has run, Scan over rows in memory scores
// the exact rows, with the same results; Scan over rows on file waits for
// it. Search engines run it in the background when they get an index, so
// it is off the first search's path; Close waits for it.
func (ix *Index) PrepareScan() {
	if !ix.HasVectors() || ix.vectorSums() == nil {
		return
	}
	ix.copyOnce.Do(func() {
		if c := newVectorCopy(ix); c != nil {
			ix.copy8.Store(c)
		}
	})
}

// q8MaxDim keeps the kernel's int32 sums from overflowing: each of dim
// products is at most 127 · 32767.
const q8MaxDim = math.MaxInt32 / (127 * 32767)

// newVectorSums adds up ix's rows per server; nil when they cannot be read
// (the index is closed).
func newVectorSums(ix *Index) *vectorSums {
	tools, dim := ix.tools, ix.dim
	vs := &vectorSums{sum: map[string][]float64{}, count: map[string]int{}}
	// Rows are in ID order, so each server's rows are consecutive.
	var srv []float64
	err := ix.eachRows(0, len(tools), func(first int, rows []float32) {
		for r := range len(rows) / dim {
			i := first + r
			t := tools[i]
			if srv == nil || t.Server != tools[i-1].Server {
				if srv = vs.sum[t.Server]; srv == nil {
					srv = make([]float64, dim)
					vs.sum[t.Server] = srv
				}
			}
			vs.count[t.Server]++
			for j, v := range rows[r*dim : (r+1)*dim : (r+1)*dim] {
				srv[j] += float64(v)
			}
		}
	})
	if err != nil {
		return nil
	}
	// The whole catalog's sum adds the servers' in name order.
	names := make([]string, 0, len(vs.sum))
	for name := range vs.sum {
		names = append(names, name)
	}
	slices.Sort(names)
	all := make([]float64, dim)
	for _, name := range names {
		for j, v := range vs.sum[name] {
			all[j] += v
		}
	}
	vs.sum[""] = all
	vs.count[""] = len(tools)
	return vs
}

// newVectorCopy quantises each of ix's rows to int8 steps of its largest
// |value| / 127, or returns nil when the copy cannot serve: a width the
// kernel does not take, a value that is not finite, or rows that cannot be
// read (the index is closed).
func newVectorCopy(ix *Index) *vectorCopy {
	rows, dim := len(ix.tools), ix.dim
	if dim <= 0 || dim%16 != 0 || dim > q8MaxDim {
		return nil
	}
	c := &vectorCopy{dim: dim, q8: make([]int8, rows*dim), scale: make([]float64, rows)}
	finite := true
	err := ix.eachRows(0, rows, func(first int, chunk []float32) {
		for r := 0; r < len(chunk)/dim && finite; r++ {
			i := first + r
			row := chunk[r*dim : (r+1)*dim : (r+1)*dim]
			var norm float64
			var big uint32 // largest |value|'s bits: for finite floats, order is kept
			for _, v := range row {
				norm += float64(v) * float64(v)
				big = max(big, math.Float32bits(v)&0x7fffffff)
			}
			if big >= 0x7f800000 { // an infinity or NaN
				finite = false
				return
			}
			c.maxNorm = max(c.maxNorm, math.Sqrt(norm))
			c.scale[i] = float64(math.Float32frombits(big)) / 127
			c.maxScale = max(c.maxScale, c.scale[i])
			if big == 0 {
				continue
			}
			inv := 1 / c.scale[i]
			q := c.q8[i*dim : (i+1)*dim : (i+1)*dim]
			for j, v := range row {
				x := float64(v) * inv // within [-127, 127] up to rounding
				q[j] = int8(x + math.Copysign(0.5, x))
			}
		}
	})
	if err != nil || !finite {
		return nil
	}
	return c
}

// quantizeQuery rounds q to int16 steps of scale (its largest |value| /
// 32767): q[i] ≈ scale · out[i].
func quantizeQuery(q []float32) ([]int16, float64) {
	var big float64
	for _, v := range q {
		big = max(big, math.Abs(float64(v)))
	}
	out := make([]int16, len(q))
	if big == 0 || math.IsInf(big, 0) || math.IsNaN(big) {
		return out, 0
	}
	scale := big / 32767
	for i, v := range q {
		out[i] = int16(max(-32767, min(32767, math.Round(float64(v)/scale))))
	}
	return out, scale
}

// slack bounds |approximate − exact| for any row, where exact is dot (the
// float32 dot product Nearest ranks by) and approximate is the 8-bit row's
// integer dot product with the int16 query, times both scales, rounded to
// float32. With row = s·R + δ (|δᵢ| ≤ s/2) and q = t·Q + η (|ηᵢ| ≤ t/2):
// q·row − s·t·(Q·R) = q·δ + s·(R·η), at most s/2·(‖q‖₁ + t·‖R‖₁), with
// ‖R‖₁ ≤ 127·dim. dot itself is within γ·‖q‖·‖row‖ of q·row, γ =
// (dim+1)·2⁻²⁴/(1−(dim+1)·2⁻²⁴), and rounding the approximation to float32
// moves it by 2⁻²⁴ of itself. A 1 % margin covers the rounding of the
// bound itself and of the scales.
func (cp *vectorCopy) slack(q []float32, qscale float64) float64 {
	var n2, n1 float64
	for _, v := range q {
		n2 += float64(v) * float64(v)
		n1 += math.Abs(float64(v))
	}
	qn := math.Sqrt(n2)
	u := math.Ldexp(1, -24)
	gamma := float64(cp.dim+1) * u / (1 - float64(cp.dim+1)*u)
	quant := cp.maxScale / 2 * (n1 + qscale*127*float64(cp.dim))
	bound := quant + gamma*qn*cp.maxNorm + u*(qn*cp.maxNorm+quant)
	return bound * 1.01
}

// approxDots writes the 8-bit dot product of the query (q16 times qscale)
// with the rows lo to hi in scope sc into scores; other rows are left as
// they were.
func (cp *vectorCopy) approxDots(q16 []int16, qscale float64, sc scope, tools []catalog.Tool, scores []float32, lo, hi int) {
	dim := cp.dim
	one := func(j int) float32 {
		return float32(float64(dotI8(cp.q8[j*dim:(j+1)*dim:(j+1)*dim], q16)) * cp.scale[j] * qscale)
	}
	i := lo
	var out [4]int32
	for ; i+4 <= hi; i += 4 {
		if !sc.has4(tools, i) {
			for j := i; j < i+4; j++ {
				if sc.has(tools, j) {
					scores[j] = one(j)
				}
			}
			continue
		}
		dotRows4I8(cp.q8[i*dim:(i+4)*dim], dim, q16[:dim], &out)
		for j, d := range out {
			scores[i+j] = float32(float64(d) * cp.scale[i+j] * qscale)
		}
	}
	for ; i < hi; i++ {
		if sc.has(tools, i) {
			scores[i] = one(i)
		}
	}
}

// dotI8 is the integer dot product of an 8-bit row with the int16 query
// (exact: q8MaxDim keeps it within int32).
func dotI8(row []int8, q []int16) int32 {
	q = q[:len(row)]
	var s int32
	for i, r := range row {
		s += int32(r) * int32(q[i])
	}
	return s
}

// scanChunk is the fewest rows worth a goroutine of their own in Scan's
// passes over every row; rescoreChunk the fewest rows it scores again.
const (
	scanChunk    = 4096
	rescoreChunk = 64
)

// dots writes the dot product of vec with the rows lo to hi in scope sc
// into scores; other rows are left as they were. It fails when the rows
// cannot be read (the index is closed).
func (ix *Index) dots(vec []float32, sc scope, scores []float32, lo, hi int) error {
	dim := ix.dim
	return ix.eachRows(lo, hi, func(first int, rows []float32) {
		n := len(rows) / dim
		r := 0
		if haveDotRows4 && dim%4 == 0 {
			// Four rows at a time, unless one of them is another server's:
			// BenchmarkDot vs BenchmarkDotRows4, about 330 vs 50 ns a row
			// from cache, so a large scan is bound by memory bandwidth.
			var out [4]float32
			for ; r+4 <= n; r += 4 {
				if i := first + r; !sc.has4(ix.tools, i) {
					for j := r; j < r+4; j++ {
						if sc.has(ix.tools, first+j) {
							scores[first+j] = dot(rows[j*dim:(j+1)*dim:(j+1)*dim], vec)
						}
					}
					continue
				}
				dotRows4(rows[r*dim:(r+4)*dim], dim, vec[:dim], &out)
				copy(scores[first+r:first+r+4], out[:])
			}
		}
		for ; r < n; r++ {
			if sc.has(ix.tools, first+r) {
				scores[first+r] = dot(rows[r*dim:(r+1)*dim:(r+1)*dim], vec)
			}
		}
	})
}

// Cosine is the dot product of vec with the vector of tool id (its cosine
// similarity), exactly as Nearest and Scan compute it; false for a tool it
// does not have, or once the index is closed.
func (ix *Index) Cosine(vec []float32, id string) (float64, bool) {
	i, ok := ix.byID[id]
	if !ok || !ix.HasVectors() || len(vec) != ix.dim {
		return 0, false
	}
	bp := ix.rowBuf()
	defer ix.putRowBuf(bp)
	row := ix.row(i, *bp)
	if row == nil {
		return 0, false
	}
	return float64(dot(row, vec)), true
}

// Cosine is Index.Cosine for a tool of the subset (false for the others).
func (s Subset) Cosine(vec []float32, id string) (float64, bool) {
	if !s.Has(id) {
		return 0, false
	}
	return s.ix.Cosine(vec, id)
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

// Vector returns a copy of tool id's embedding; false for a tool it does
// not have, or once the index is closed.
func (ix *Index) Vector(id string) ([]float32, bool) {
	i, ok := ix.byID[id]
	if !ok || !ix.HasVectors() {
		return nil, false
	}
	out := make([]float32, ix.dim)
	if ix.readRows(i, out) != nil {
		return nil, false
	}
	return out, true
}

// Dot is the dot product of two vectors as Scan and Cosine compute it.
func Dot(a, b []float32) float64 { return float64(dot(a, b)) }
