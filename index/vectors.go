package index

import (
	"container/heap"
	"slices"
	"sort"
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
	sort.Slice(h, func(a, b int) bool {
		if h[a].score != h[b].score {
			return h[a].score > h[b].score
		}
		return h[a].row < h[b].row
	})
	out := make([]Scored, len(h))
	for j, r := range h {
		out[j] = Scored{ID: ix.idAt(r.row), Score: r.score}
	}
	return out
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
	slices.SortFunc(rows, func(a, b hrow) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return a.row - b.row
	})
	out := make([]Scored, len(rows))
	for j, r := range rows {
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
