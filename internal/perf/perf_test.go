package perf_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/perf"
)

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 95, 7 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 0, 1 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 50, 3 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 95, 5 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 100, 5 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 95, 19 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.ds)
		if got := perf.Percentile(tt.ds, tt.p); got != tt.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tt.ds, tt.p, got, tt.want)
		}
		if !slices.Equal(in, tt.ds) {
			t.Errorf("Percentile reordered its input: %v, was %v", tt.ds, in)
		}
	}
}

// Alternate takes turns: in round r the calls run starting with call
// r % len(calls), every call once per round, warm-up rounds untimed.
func TestAlternateOrder(t *testing.T) {
	var order []string
	call := func(name string) func() error {
		return func() error { order = append(order, name); return nil }
	}
	lat, err := perf.Alternate(1, 3, call("a"), call("b"), call("c"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c" /* warm-up */, "a", "b", "c", "b", "c", "a", "c", "a", "b"}
	if !slices.Equal(order, want) {
		t.Errorf("call order %v, want %v", order, want)
	}
	if len(lat) != 3 || len(lat[0]) != 3 || len(lat[2]) != 3 {
		t.Errorf("latencies %v: want 3 calls × 3 rounds", lat)
	}
}

// Each call's latencies land in its own row: every round of the call that
// sleeps 2 ms is timed at 2 ms or more.
func TestAlternateTimesEachCall(t *testing.T) {
	slow := func() error { time.Sleep(2 * time.Millisecond); return nil } // the work being timed, not synchronisation
	fast := func() error { return nil }
	lat, err := perf.Alternate(0, 5, fast, slow)
	if err != nil {
		t.Fatal(err)
	}
	if p := perf.Percentile(lat[1], 0); p < 2*time.Millisecond {
		t.Errorf("slow call's fastest round %v, want ≥ 2ms (rows %v)", p, lat)
	}
}

func TestAlternateError(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	failing := func() error {
		if n++; n == 4 {
			return boom
		}
		return nil
	}
	_, err := perf.Alternate(2, 10, failing)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "round 1") {
		t.Errorf("err = %v, want boom in round 1 (after 2 warm-up calls)", err)
	}
	if _, err := perf.Alternate(0, 1); err == nil {
		t.Error("no calls: want an error")
	}
}

// Concurrent makes every call once, worker w taking calls w, w+workers, …,
// and joins the workers' errors.
func TestConcurrent(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{} // call → worker
	lat, err := perf.Concurrent(10, 3, func(w, i int) error {
		mu.Lock()
		defer mu.Unlock()
		seen[i] = w
		return nil
	})
	if err != nil || len(lat) != 10 || len(seen) != 10 {
		t.Fatalf("lat %v, err %v, calls %v", lat, err, seen)
	}
	for i, w := range seen {
		if w != i%3 {
			t.Errorf("call %d made by worker %d, want %d", i, w, i%3)
		}
	}
	boom := errors.New("boom")
	_, err = perf.Concurrent(6, 2, func(w, i int) error {
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "worker 1, call 3") {
		t.Errorf("err = %v, want boom from worker 1, call 3", err)
	}
}
