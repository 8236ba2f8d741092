// Package perf owns the measuring primitives every latency figure of
// toolgate goes through: Percentile (the nearest-rank percentile of a set of
// durations), Alternate (timing several ways of making the same call in one
// loop, taking turns, so that all see the same machine load) and Concurrent
// (timing calls made by several callers at once). `toolgate
// eval`, the `toolgate-bench` table and the Go benchmarks use them, so a p50
// means the same thing everywhere. It imports nothing of toolgate's.
package perf

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Percentile returns the p-th percentile (0–100) of ds by the nearest-rank
// method: the smallest sample that at least p % of the samples are at or
// below (p = 0 gives the minimum, p = 50 the lower median). It is 0 for no
// samples; ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Alternate times n rounds of calls: each round makes every call once, in
// turn, starting one further along each round, so that no call always
// follows another and all of them see the same machine load. That is how
// the overhead of one way over another (a call through the gateway over
// the same call made directly) is measured: on a shared machine the load
// drifts more between two separate runs than the difference being
// measured. warmup untimed rounds come first. lat[i][r] is call i's
// latency in round r. The first error stops the loop and names the call
// and the round.
func Alternate(warmup, n int, calls ...func() error) (lat [][]time.Duration, err error) {
	if len(calls) == 0 {
		return nil, errors.New("perf.Alternate: no calls")
	}
	for r := range warmup {
		for i, c := range calls {
			if err := c(); err != nil {
				return nil, fmt.Errorf("warm-up round %d, call %d: %w", r, i, err)
			}
		}
	}
	lat = make([][]time.Duration, len(calls))
	for i := range lat {
		lat[i] = make([]time.Duration, n)
	}
	for r := range n {
		for k := range calls {
			i := (r + k) % len(calls)
			t0 := time.Now()
			err := calls[i]()
			lat[i][r] = time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("round %d, call %d: %w", r, i, err)
			}
		}
	}
	return lat, nil
}

// Concurrent times n calls made by workers goroutines at once: worker w
// makes calls i = w, w+workers, w+2·workers, … and lat[i] is call i's
// latency. The first error of each worker stops that worker; the errors
// are joined.
func Concurrent(n, workers int, call func(w, i int) error) (lat []time.Duration, err error) {
	if workers < 1 {
		return nil, fmt.Errorf("perf.Concurrent: %d workers", workers)
	}
	lat = make([]time.Duration, n)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				t0 := time.Now()
				if err := call(w, i); err != nil {
					errs[w] = fmt.Errorf("worker %d, call %d: %w", w, i, err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return lat, errors.Join(errs...)
}
