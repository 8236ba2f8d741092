package limit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// held is a Caller whose calls run until released, recording the order in
// which they started.
type held struct {
	mu      sync.Mutex
	started []string
	release chan struct{}
}

func (h *held) CallTool(ctx context.Context, server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
	h.mu.Lock()
	h.started = append(h.started, tool)
	h.mu.Unlock()
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &mcp.CallToolResult{}, nil
}

func (h *held) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.started)
}

func (h *held) order() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.started...)
}

// Calls over the cap wait; one that waits longer than the queue timeout
// is refused with ErrBusy; other backends are not held up.
func TestInFlightCap(t *testing.T) {
	h := &held{release: make(chan struct{})}
	c := NewInFlight(h, &Options{MaxInFlight: 2, QueueTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	errs := make(chan error, 3)
	for range 2 {
		go func() { _, err := c.CallTool(ctx, "a", "slow", nil); errs <- err }()
	}
	testenv.Eventually(t, "two calls running", func() bool { return h.count() == 2 })
	if _, err := c.CallTool(ctx, "a", "slow", nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("a call over the cap: %v, want ErrBusy", err)
	}
	if c.Queued("a") != 0 {
		t.Errorf("the refused call is still queued")
	}
	// Another backend has its own slots.
	go func() { _, err := c.CallTool(ctx, "b", "other", nil); errs <- err }()
	testenv.Eventually(t, "the call on b running", func() bool { return h.count() == 3 })
	close(h.release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.gates) != 0 {
		t.Errorf("idle gates kept: %v", c.gates)
	}
}

// A freed slot goes to the waiting call whose tool runs least: a hot tool
// with many queued calls does not hold a cold one back.
func TestInFlightFair(t *testing.T) {
	h := &held{release: make(chan struct{})}
	c := NewInFlight(h, &Options{MaxInFlight: 2, QueueTimeout: time.Minute})
	ctx := context.Background()
	var wg sync.WaitGroup
	call := func(tool string) { wg.Go(func() { _, _ = c.CallTool(ctx, "a", tool, nil) }) }
	call("hot")
	call("hot")
	testenv.Eventually(t, "two hot calls running", func() bool { return h.count() == 2 })
	for range 3 {
		call("hot")
	}
	testenv.Eventually(t, "three hot calls queued", func() bool { return c.Queued("a") == 3 })
	call("cold") // arrives last
	testenv.Eventually(t, "four calls queued", func() bool { return c.Queued("a") == 4 })
	h.release <- struct{}{} // one hot call ends
	testenv.Eventually(t, "the next call running", func() bool { return h.count() == 3 })
	if got := h.order()[2]; got != "cold" {
		t.Errorf("the freed slot went to %q, want the cold tool (order %v)", got, h.order())
	}
	close(h.release)
	wg.Wait()
}

// A caller that gives up while queued leaves the queue.
func TestInFlightCancelled(t *testing.T) {
	h := &held{release: make(chan struct{})}
	c := NewInFlight(h, &Options{MaxInFlight: 1, QueueTimeout: time.Minute})
	go func() { _, _ = c.CallTool(context.Background(), "a", "x", nil) }()
	testenv.Eventually(t, "one call running", func() bool { return h.count() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.CallTool(ctx, "a", "x", nil); errc <- err }()
	testenv.Eventually(t, "one call queued", func() bool { return c.Queued("a") == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
	if c.Queued("a") != 0 {
		t.Error("the cancelled call is still queued")
	}
	close(h.release)
}

func TestRates(t *testing.T) {
	r := NewRates(1, 2)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	for i := range 2 {
		if ok, _ := r.Allow("k"); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, after := r.Allow("k")
	if ok || after <= 0 || after > time.Second {
		t.Fatalf("over the burst: %v, retry after %s", ok, after)
	}
	if RetryAfter(after) != "1" || RetryAfter(1500*time.Millisecond) != "2" || RetryAfter(0) != "1" {
		t.Error("RetryAfter rounding")
	}
	if ok, _ := r.Allow("other"); !ok {
		t.Error("another key shares the bucket")
	}
	now = now.Add(time.Second)
	if ok, _ := r.Allow("k"); !ok {
		t.Error("a refused request used up the token")
	}
	// AllowN takes all or none; more than the burst takes the burst.
	now = now.Add(2 * time.Second)
	if ok, _ := r.AllowN("k", 3); !ok {
		t.Error("3 tokens of a full bucket of 2 refused: more than the burst could never be had")
	}
	if ok, after := r.AllowN("k", 1); ok || after <= 0 {
		t.Errorf("a token of an emptied bucket: %v, retry after %s", ok, after)
	}
}

// Refused requests from one address are recorded up to the burst, then
// answered 429 and only counted, one summary per address per flush;
// other addresses keep their own buckets; the bucket refills.
func TestRefusals(t *testing.T) {
	type sum struct {
		addr string
		n    int
	}
	var sums []sum
	r := NewRefusals(&RefusalOptions{PerMinute: 60, Burst: 3, Summary: func(addr string, n int, _ time.Time) { sums = append(sums, sum{addr, n}) }})
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	defer r.Close()
	for i := range 3 {
		if ok, _ := r.Refuse("203.0.113.7:4000"); !ok {
			t.Fatalf("refused request %d under the burst: not recorded", i)
		}
	}
	for i := range 5 {
		ok, after := r.Refuse("203.0.113.7:" + string(rune('5'+i)) + "000")
		if ok || after <= 0 || after > time.Second {
			t.Fatalf("request %d over the burst: record %v, retry after %s; want 429 within a second", i, ok, after)
		}
	}
	if ok, _ := r.Refuse("198.51.100.1:1"); !ok {
		t.Fatal("another address shares the limited one's bucket")
	}
	r.Flush()
	if len(sums) != 1 || sums[0] != (sum{"203.0.113.7", 5}) {
		t.Fatalf("summaries %v, want one of 5 from 203.0.113.7", sums)
	}
	r.Flush()
	if len(sums) != 1 {
		t.Fatalf("a flush with nothing suppressed reported %v", sums[1:])
	}
	now = now.Add(time.Second)
	if ok, _ := r.Refuse("203.0.113.7:4000"); !ok {
		t.Fatal("a second later the bucket has not refilled a token")
	}
}

// The limit holds at most MaxAddresses, least recently refused forgotten
// first (their suppressed count reported), and forgets idle addresses.
func TestRefusalsBounded(t *testing.T) {
	var reported []string
	r := NewRefusals(&RefusalOptions{PerMinute: 60, Burst: 1, MaxAddresses: 3, Summary: func(addr string, n int, _ time.Time) { reported = append(reported, addr) }})
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	r.Refuse("10.0.0.1:1")
	r.Refuse("10.0.0.1:1") // suppressed
	for _, a := range []string{"10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1", "10.0.0.5:1"} {
		r.Refuse(a)
	}
	if n := r.Tracked(); n != 3 {
		t.Fatalf("%d addresses tracked, want the cap 3", n)
	}
	if len(reported) != 1 || reported[0] != "10.0.0.1" {
		t.Fatalf("reported %v, want the forgotten 10.0.0.1's suppressed request", reported)
	}
	now = now.Add(time.Minute) // every bucket full again
	r.Refuse("10.0.0.9:1")
	if n := r.Tracked(); n != 1 {
		t.Fatalf("%d addresses tracked after a minute idle, want 1", n)
	}
}

func TestAddressOf(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.7:4000":           "203.0.113.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:80":  "2001:db8:1:2::/64",
		"[::1]:5000":                 "::1",
		"[fe80::1%eth0]:7":           "fe80::/64",
		"[::ffff:198.51.100.1]:1":    "198.51.100.1",
		"@":                          "@",
		"unix-socket-peer":           "unix-socket-peer",
	} {
		if got := AddressOf(in); got != want {
			t.Errorf("AddressOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// Streams: a key holds at most Max streams; a stream's end gives its slot
// back once, however often it is told; keys do not share slots.
func TestStreams(t *testing.T) {
	s := NewStreams(2)
	a, ok1 := s.Open("a")
	_, ok2 := s.Open("a")
	if _, ok3 := s.Open("a"); !ok1 || !ok2 || ok3 {
		t.Fatalf("opens of key a: %v %v %v, want two then a refusal", ok1, ok2, ok3)
	}
	if _, ok := s.Open("b"); !ok {
		t.Error("key b refused: a's streams count against b")
	}
	a()
	a() // once
	if _, ok := s.Open("a"); !ok {
		t.Error("a stream ended, yet key a cannot open another")
	}
	if _, ok := s.Open("a"); ok {
		t.Error("an end told twice gave two slots back")
	}
	if NewStreams(0).Max() != DefaultMaxStreams {
		t.Errorf("NewStreams(0).Max() = %d, want %d", NewStreams(0).Max(), DefaultMaxStreams)
	}
}
