package index

import (
	"container/heap"
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
	Sum float64  // the sum of every scored tool's cosine, added in ID order
	N   int      // how many tools were scored
}

// Scan scores every tool of server ("" = all) against vec, like Nearest,
// and keeps only the k best, plus the sum of all the scores. Its Top equals
// Nearest(vec, k, server). Without vectors, or with a vector of the wrong
// size, it returns the zero VectorScan.
//
// The dot products of a large catalog are split among the cores (a single
// search otherwise leaves the second core idle once its query is embedded);
// the sum and the top k are then taken in one pass in row order, so the
// result does not depend on the split.
func (ix *Index) Scan(vec []float32, k int, server string) VectorScan {
	if ix.vecs == nil || len(vec) != ix.dim || k <= 0 {
		return VectorScan{}
	}
	rows := len(ix.tools)
	bp, _ := ix.scanBufs.Get().(*[]float32)
	if bp == nil || cap(*bp) < rows {
		b := make([]float32, rows)
		bp = &b
	}
	scores := (*bp)[:rows]
	defer ix.scanBufs.Put(bp)

	workers := min(runtime.GOMAXPROCS(0), rows/scanChunk)
	if workers <= 1 {
		ix.dots(vec, server, scores, 0, rows)
	} else {
		var wg sync.WaitGroup
		per := (rows + workers - 1) / workers
		for lo := per; lo < rows; lo += per {
			wg.Go(func() { ix.dots(vec, server, scores, lo, min(lo+per, rows)) })
		}
		ix.dots(vec, server, scores, 0, per)
		wg.Wait()
	}

	h := make(scoredHeap, 0, min(k, rows)+1)
	var sum float64
	n := 0
	for i, f := range scores {
		if server != "" && ix.tools[i].Server != server {
			continue
		}
		s := float64(f)
		sum += s
		n++
		if len(h) < k {
			heap.Push(&h, hrow{i, s})
		} else if s > h[0].score {
			// Rows come in ascending order, so an equal score is a later
			// row: worse than the heap's worst, never kept.
			h[0] = hrow{i, s}
			heap.Fix(&h, 0)
		}
	}
	return VectorScan{Top: ix.sortedRows(h), Sum: sum, N: n}
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
