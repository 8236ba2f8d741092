package index

import (
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/toolgate/toolgate/index/catalog"
)

// Filter says which tools of an index a search may return (the policy
// layer makes one per caller scope: a profile, an API key, the servers
// disabled, the quarantine). Searches apply it inside both signals as a
// row bitmap — the keyword scorer skips the rows it drops as it skips
// other servers', and so does the vector scan — so a search restricted to
// 9 tools of 10,000 gets the best of those 9, ranked exactly as the
// whole-catalog ranking restricted to them would rank them, rather than
// the best of all cut down afterwards.
//
// A Filter is immutable. It evaluates its predicate once per index, on the
// first search of that index, and keeps the result for the index it saw
// last (a swapped-in index is evaluated again).
type Filter struct {
	keep func(catalog.Tool) bool
	last atomic.Pointer[filterRows]
}

// NewFilter returns the filter that lets through the tools keep accepts.
// keep must give the same answer for the same tool every time, and be safe
// for concurrent use.
func NewFilter(keep func(catalog.Tool) bool) *Filter { return &Filter{keep: keep} }

// filterRows is a Filter applied to one index. The index is held weakly: a
// filter kept in a cache must not keep a swapped-out index's memory alive.
type filterRows struct {
	ix   weak.Pointer[Index]
	rows *rowSet // nil when every tool is kept
}

// rows returns f's rows of ix: nil when f is nil or keeps every tool.
func (f *Filter) rows(ix *Index) *rowSet {
	if f == nil {
		return nil
	}
	w := weak.Make(ix)
	if fr := f.last.Load(); fr != nil && fr.ix == w {
		return fr.rows
	}
	// Two first searches may both evaluate it; either result is right.
	fr := &filterRows{ix: w, rows: newRowSet(ix, f.keep)}
	f.last.Store(fr)
	return fr.rows
}

// rowSet is the set of rows a Filter keeps in one index.
type rowSet struct {
	bits  []uint64
	count map[string]int // kept rows per server; "" = all kept rows

	sumsOnce sync.Once
	sums     map[string][]float64 // vector sums of the kept rows per server; "" = all
}

func newRowSet(ix *Index, keep func(catalog.Tool) bool) *rowSet {
	rs := &rowSet{bits: make([]uint64, (len(ix.tools)+63)/64), count: map[string]int{}}
	for i, t := range ix.tools {
		if keep(t) {
			rs.bits[i>>6] |= 1 << (i & 63)
			rs.count[t.Server]++
			rs.count[""]++
		}
	}
	if rs.count[""] == len(ix.tools) {
		return nil
	}
	return rs
}

// has reports whether row i is kept.
func (rs *rowSet) has(i int) bool { return rs.bits[i>>6]&(1<<(i&63)) != 0 }

// has4 reports whether rows i to i+3 are all kept. It may say false for
// four rows that straddle two words (a scan part may start at any row):
// the caller then checks each row.
func (rs *rowSet) has4(i int) bool { return rs.bits[i>>6]>>(i&63)&0xf == 0xf }

// vectorSums returns the sums of the kept rows' vectors per server ("" =
// all kept rows), made on first use; nil when the rows cannot be read (the
// index is closed). A server kept whole has the index's
// own sum, and the sum of all adds the servers' in name order as the
// index's does, so the sums are those of the catalog the filter leaves.
func (rs *rowSet) vectorSums(ix *Index, all *vectorSums) map[string][]float64 {
	rs.sumsOnce.Do(func() {
		dim := ix.dim
		sums := map[string][]float64{}
		for server, n := range rs.count {
			if server == "" || n == 0 {
				continue
			}
			if n == all.count[server] {
				sums[server] = all.sum[server]
				continue
			}
			sums[server] = make([]float64, dim)
		}
		err := ix.eachRows(0, len(ix.tools), func(first int, rows []float32) {
			for r := range len(rows) / dim {
				i := first + r
				t := ix.tools[i]
				if !rs.has(i) || rs.count[t.Server] == all.count[t.Server] {
					continue
				}
				s := sums[t.Server]
				for j, v := range rows[r*dim : (r+1)*dim : (r+1)*dim] {
					s[j] += float64(v)
				}
			}
		})
		if err != nil { // closed: no sums
			return
		}
		names := make([]string, 0, len(sums))
		for name := range sums {
			names = append(names, name)
		}
		slices.Sort(names)
		total := make([]float64, dim)
		for _, name := range names {
			for j, v := range sums[name] {
				total[j] += v
			}
		}
		sums[""] = total
		rs.sums = sums
	})
	return rs.sums
}

// scope is the part of an index one search looks at: the tools of server
// ("" = every server) that rows keeps (nil = all of them).
type scope struct {
	server string
	rows   *rowSet
}

// has reports whether row i of tools is in the scope.
func (sc scope) has(tools []catalog.Tool, i int) bool {
	return (sc.server == "" || tools[i].Server == sc.server) && (sc.rows == nil || sc.rows.has(i))
}

// has4 reports whether rows i to i+3 are all in the scope; false may also
// mean the caller must check each row (see rowSet.has4).
func (sc scope) has4(tools []catalog.Tool, i int) bool {
	if sc.server != "" && (tools[i].Server != sc.server || tools[i+1].Server != sc.server ||
		tools[i+2].Server != sc.server || tools[i+3].Server != sc.server) {
		return false
	}
	return sc.rows == nil || sc.rows.has4(i)
}

// Subset is the part of an index a Filter lets a search see. Its methods
// are the Index's, restricted to those tools; the Index's own methods are
// those of the Subset with no filter. It is valid while the index is.
type Subset struct {
	ix   *Index
	rows *rowSet
}

// In returns the subset of ix that f lets through (all of it for a nil f,
// or one that keeps every tool).
func (ix *Index) In(f *Filter) Subset { return Subset{ix: ix, rows: f.rows(ix)} }

func (s Subset) scope(server string) scope { return scope{server: server, rows: s.rows} }

// Filtered reports whether the subset leaves tools out.
func (s Subset) Filtered() bool { return s.rows != nil }

// Len is the number of tools of server ("" = every server) in the subset.
func (s Subset) Len(server string) int {
	if s.rows != nil {
		return s.rows.count[server]
	}
	if server == "" {
		return len(s.ix.tools)
	}
	n := 0
	for _, t := range s.ix.tools {
		if t.Server == server {
			n++
		}
	}
	return n
}

// Has reports whether the tool id is in the subset.
func (s Subset) Has(id string) bool {
	i, ok := s.ix.byID[id]
	return ok && (s.rows == nil || s.rows.has(i))
}
