package search

import (
	"math"
	"math/rand/v2"
	"slices"
)

// This file holds the statistics of `toolgate eval --bootstrap`: how sure a
// figure is, and whether one mode beats another on the same queries.

// BootstrapSeed seeds the resampling, so that the same run gives the same
// intervals (the reports of a paper's appendix are reproduced byte for
// byte).
const BootstrapSeed = 1

// Interval is a 95% percentile-bootstrap interval, written [lo, hi].
type Interval [2]float64

// Diff is a paired comparison of a metric between two modes on the same
// queries: Mean is this mode's figure minus the baseline's, CI95 the
// interval of that difference, P the two-sided bootstrap p-value (twice the
// share of resamples on the far side of 0, at most 1; 0 stands for "below
// 1/replicates").
type Diff struct {
	Mean float64  `json:"mean"`
	CI95 Interval `json:"ci95"`
	P    float64  `json:"p"`
}

// NamedInterval and NamedDiff keep the metrics' report order.
type NamedInterval struct {
	Name string
	CI   Interval
}

type NamedDiff struct {
	Name string
	Diff Diff
}

// Intervals and Diffs are written as one JSON object of the metrics'
// names, in report order, as MetricList is.
type (
	Intervals []NamedInterval
	Diffs     []NamedDiff
)

func (l Intervals) MarshalJSON() ([]byte, error) {
	return orderedJSON(len(l), func(i int) (string, any) { return l[i].Name, l[i].CI })
}

func (l Diffs) MarshalJSON() ([]byte, error) {
	return orderedJSON(len(l), func(i int) (string, any) { return l[i].Name, l[i].Diff })
}

// Bootstrap resamples the answerable queries of the reports (the same
// query set, in every report: Evaluate's of one set in several modes)
// replicates times with replacement, the same resamples for every report,
// and gives each report's 95% interval of each ranking metric (hit@k,
// recall@k, mrr@10, ndcg@10; the abstain rates depend on the threshold and
// are left out), and each report's paired difference to reports[base]
// (nil for base itself, or when base < 0). The ranking metrics of a query
// do not depend on the threshold, so the reports may be At any.
func Bootstrap(reports []Report, base, replicates int) (cis []Intervals, diffs []Diffs) {
	if len(reports) == 0 || replicates <= 0 {
		return nil, nil
	}
	// values[r][k][j]: report r's metric k on its j-th answerable query.
	var names []string
	for _, s := range (&Metrics{}).slots() {
		if s.kind == ranking && !s.abstain {
			names = append(names, s.name)
		}
	}
	values := make([][][]float64, len(reports))
	n := -1
	for r, rep := range reports {
		values[r] = make([][]float64, len(names))
		for _, q := range rep.scores {
			if q.NoAnswer {
				continue
			}
			m := Average([]QueryMetrics{q})
			slots := m.slots()
			k := 0
			for _, s := range slots {
				if s.kind == ranking && !s.abstain {
					values[r][k] = append(values[r][k], *s.v)
					k++
				}
			}
		}
		if r == 0 {
			n = len(values[r][0])
		} else if len(values[r][0]) != n {
			return nil, nil // not one query set
		}
	}
	if n <= 0 {
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(BootstrapSeed, 0))
	// means[r][k][b]: report r's metric k in resample b.
	means := make([][][]float64, len(reports))
	for r := range reports {
		means[r] = make([][]float64, len(names))
		for k := range names {
			means[r][k] = make([]float64, replicates)
		}
	}
	idx := make([]int, n)
	for b := range replicates {
		for j := range idx {
			idx[j] = rng.IntN(n)
		}
		for r := range reports {
			for k := range names {
				sum := 0.0
				v := values[r][k]
				for _, j := range idx {
					sum += v[j]
				}
				means[r][k][b] = sum / float64(n)
			}
		}
	}
	cis = make([]Intervals, len(reports))
	diffs = make([]Diffs, len(reports))
	for r := range reports {
		for k, name := range names {
			cis[r] = append(cis[r], NamedInterval{name, interval(slices.Clone(means[r][k]))})
		}
		if base < 0 || base >= len(reports) || r == base {
			continue
		}
		for k, name := range names {
			d := make([]float64, replicates)
			below, above := 0, 0
			for b := range d {
				d[b] = means[r][k][b] - means[base][k][b]
				if d[b] <= 0 {
					below++
				}
				if d[b] >= 0 {
					above++
				}
			}
			mean := 0.0
			for j := range n {
				mean += values[r][k][j] - values[base][k][j]
			}
			p := min(1, 2*float64(min(below, above))/float64(replicates))
			diffs[r] = append(diffs[r], NamedDiff{name, Diff{Mean: mean / float64(n), CI95: interval(d), P: p}})
		}
	}
	return cis, diffs
}

// interval is the 2.5th and 97.5th percentiles (nearest rank) of xs,
// which it sorts.
func interval(xs []float64) Interval {
	slices.Sort(xs)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(xs)))) - 1
		return xs[min(max(i, 0), len(xs)-1)]
	}
	return Interval{at(0.025), at(0.975)}
}
