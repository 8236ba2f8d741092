// Package limit owns the gateway's limits on load: per API key, requests
// per second with a burst (Rates, golang.org/x/time/rate token buckets),
// answered over HTTP with 429 and Retry-After; per backend, a cap on tool
// calls in flight (InFlight, a decorator of the gateway's Caller), where a
// call over the cap waits in a queue up to a deadline and is then refused
// with ErrBusy. A slot that frees goes to the waiting call whose tool has
// the fewest calls running, so one hot tool cannot starve a backend's
// other tools.
package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/toolgate/toolgate/gateway/backend"
)

// Defaults (toolgate.limits in the config overrides them).
const (
	// An MCP session over streamable HTTP is a few requests (initialize,
	// initialized, then one per call).
	DefaultRequestsPerSecond = 50
	DefaultBurst             = 100
	DefaultMaxInFlight       = 16
	DefaultQueueTimeout      = 10 * time.Second
)

// ErrBusy is wrapped by the error of a call refused because its backend
// had MaxInFlight calls running for the whole QueueTimeout (a
// *backend.UnavailableError: the backend cannot take the call now).
var ErrBusy = errors.New("backend busy")

// Caller runs one tool on one backend (the backend pool).
type Caller interface {
	CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error)
}

// Options configure InFlight. Nil means defaults.
type Options struct {
	MaxInFlight  int           // calls running per backend (default DefaultMaxInFlight)
	QueueTimeout time.Duration // longest wait for a slot (default DefaultQueueTimeout)
}

// InFlight caps the calls running on each backend. It is a Caller around
// the pool's.
type InFlight struct {
	next Caller
	max  int
	wait time.Duration

	mu    sync.Mutex
	gates map[string]*gate // by server; a gate lives while it has calls
}

var _ Caller = (*InFlight)(nil)

// NewInFlight caps next's calls.
func NewInFlight(next Caller, opts *Options) *InFlight {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.QueueTimeout <= 0 {
		o.QueueTimeout = DefaultQueueTimeout
	}
	return &InFlight{next: next, max: o.MaxInFlight, wait: o.QueueTimeout, gates: map[string]*gate{}}
}

// gate is one backend's slots and queue. InFlight.mu guards it.
type gate struct {
	running int
	perTool map[string]int
	waiters []*waiter // in arrival order
}

type waiter struct {
	tool    string
	ready   chan struct{} // closed when granted
	granted bool
}

// CallTool runs the call once its backend has a free slot; ErrBusy when
// none frees within the queue timeout.
func (c *InFlight) CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	if err := c.acquire(ctx, server, tool); err != nil {
		return nil, err
	}
	defer c.release(server, tool)
	return c.next.CallTool(ctx, server, tool, args)
}

// Queued is how many calls wait for a slot on server.
func (c *InFlight) Queued(server string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.gates[server]; g != nil {
		return len(g.waiters)
	}
	return 0
}

func (c *InFlight) acquire(ctx context.Context, server, tool string) error {
	c.mu.Lock()
	g := c.gates[server]
	if g == nil {
		g = &gate{perTool: map[string]int{}}
		c.gates[server] = g
	}
	if g.running < c.max && len(g.waiters) == 0 {
		g.take(tool)
		c.mu.Unlock()
		return nil
	}
	w := &waiter{tool: tool, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	c.mu.Unlock()

	t := time.NewTimer(c.wait)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-t.C:
		err = &backend.UnavailableError{Server: server, Err: fmt.Errorf("%w: %d calls were running on it for %s, the longest a call waits (toolgate.limits.queueTimeout)", ErrBusy, c.max, c.wait)}
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.granted { // granted as the wait ended: take it
		return nil
	}
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			break
		}
	}
	c.drop(server, g)
	return err
}

func (c *InFlight) release(server, tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gates[server]
	g.running--
	if g.perTool[tool]--; g.perTool[tool] == 0 {
		delete(g.perTool, tool)
	}
	if len(g.waiters) > 0 {
		// The waiter whose tool runs least, the earliest of those.
		best := 0
		for i, w := range g.waiters {
			if g.perTool[w.tool] < g.perTool[g.waiters[best].tool] {
				best = i
			}
		}
		w := g.waiters[best]
		g.waiters = append(g.waiters[:best], g.waiters[best+1:]...)
		g.take(w.tool)
		w.granted = true
		close(w.ready)
	}
	c.drop(server, g)
}

func (g *gate) take(tool string) {
	g.running++
	g.perTool[tool]++
}

// drop forgets an idle gate, so removed servers leave nothing behind.
func (c *InFlight) drop(server string, g *gate) {
	if g.running == 0 && len(g.waiters) == 0 {
		delete(c.gates, server)
	}
}

// Rates holds one token bucket per API key.
type Rates struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// NewRates allows each key perSecond requests per second with bursts of
// burst (0 = the defaults).
func NewRates(perSecond float64, burst int) *Rates {
	if perSecond <= 0 {
		perSecond = DefaultRequestsPerSecond
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	return &Rates{limit: rate.Limit(perSecond), burst: burst, now: time.Now, buckets: map[string]*rate.Limiter{}}
}

// Allow takes a token of key's bucket; when there is none, it reports how
// long until there is one (for Retry-After), taking nothing.
func (r *Rates) Allow(key string) (ok bool, retryAfter time.Duration) {
	r.mu.Lock()
	b := r.buckets[key]
	if b == nil {
		b = rate.NewLimiter(r.limit, r.burst)
		r.buckets[key] = b
	}
	r.mu.Unlock()
	now := r.now()
	res := b.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// RetryAfter is the Retry-After value (whole seconds, at least 1) for a
// wait of d.
func RetryAfter(d time.Duration) string {
	return fmt.Sprint(max(1, int(math.Ceil(d.Seconds()))))
}
