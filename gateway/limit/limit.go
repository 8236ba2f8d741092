// Package limit owns the gateway's limits on load: per API key, requests
// per second with a burst (Rates, golang.org/x/time/rate token buckets),
// answered over HTTP with 429 and Retry-After; per backend, a cap on tool
// calls in flight (InFlight, a decorator of the gateway's Caller), where a
// call over the cap waits in a queue up to a deadline and is then refused
// with ErrBusy. A slot that frees goes to the waiting call whose tool has
// the fewest calls running, so one hot tool cannot starve a backend's
// other tools. Per client address, requests refused for want of a valid
// key (Refusals), so a flood of them cannot fill the audit log. Per API
// key, the subscriptions/listen streams open at once (Streams).
package limit

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
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
	// A client holds one subscriptions/listen stream; a key shared by a
	// team holds one per client.
	DefaultMaxStreams = 64
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
	// Gate names the slots a call takes: calls of equal gates share
	// MaxInFlight of them. nil, or "", is the call's server. A
	// management call that waits for one server's start takes that
	// server's management slots, not the built-in server's (mgmt.Gate).
	Gate func(server, tool string, args map[string]any) string
}

// InFlight caps the calls running on each backend. It is a Caller around
// the pool's.
type InFlight struct {
	next Caller
	max  int
	wait time.Duration
	gate func(server, tool string, args map[string]any) string

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
	return &InFlight{next: next, max: o.MaxInFlight, wait: o.QueueTimeout, gate: o.Gate, gates: map[string]*gate{}}
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
	at := server
	if c.gate != nil {
		at = cmp.Or(c.gate(server, tool, args), server)
	}
	if err := c.acquire(ctx, at, server, tool); err != nil {
		return nil, err
	}
	defer c.release(at, tool)
	return c.next.CallTool(ctx, server, tool, args)
}

// Queued is how many calls wait for a slot of gate (a server's name
// unless Options.Gate names another).
func (c *InFlight) Queued(gate string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.gates[gate]; g != nil {
		return len(g.waiters)
	}
	return 0
}

// acquire takes a slot of gate at for a call of server's tool.
func (c *InFlight) acquire(ctx context.Context, at, server, tool string) error {
	c.mu.Lock()
	g := c.gates[at]
	if g == nil {
		g = &gate{perTool: map[string]int{}}
		c.gates[at] = g
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
		on := "on it"
		if at != server {
			on = "on it for " + strings.TrimPrefix(at, server+GateSep)
		}
		err = &backend.UnavailableError{Server: server, Err: fmt.Errorf("%w: %d calls were running %s for %s, the longest a call waits (toolgate.limits.queueTimeout)", ErrBusy, c.max, on, c.wait)}
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
	c.drop(at, g)
	return err
}

// GateSep joins a server and what a call on it acts on into a gate's name
// (Options.Gate): "toolgate/github".
const GateSep = "/"

// release gives back a slot of gate at that a call of tool took.
func (c *InFlight) release(at, tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gates[at]
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
	c.drop(at, g)
}

func (g *gate) take(tool string) {
	g.running++
	g.perTool[tool]++
}

// drop forgets an idle gate, so removed servers leave nothing behind.
func (c *InFlight) drop(at string, g *gate) {
	if g.running == 0 && len(g.waiters) == 0 {
		delete(c.gates, at)
	}
}

// Rates holds one token bucket per API key.
type Rates struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter

	over *Refusals // the refusals over the rate, per key (RecordOver)
}

// RecordOver limits, per key, the requests over the rate that are audited
// one by one as over limits a client address's refused requests: beyond
// it Record says not to audit them, and over's Summary is told how many,
// once per interval (ids are key names), so a key's flood of 429s cannot
// rotate earlier evidence out of the audit log. Call it before use.
func (r *Rates) RecordOver(over *Refusals) *Rates {
	r.over = over
	return r
}

// Record counts one request of key that Allow refused, and reports whether
// it is to be audited (always without RecordOver).
func (r *Rates) Record(key string) bool {
	if r.over == nil {
		return true
	}
	record, _ := r.over.Count(key)
	return record
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
	return r.AllowN(key, 1)
}

// AllowN is Allow for n tokens (a JSON-RPC batch's messages) at once: all
// or none; n over the burst takes the burst, which a full bucket holds.
func (r *Rates) AllowN(key string, n int) (ok bool, retryAfter time.Duration) {
	r.mu.Lock()
	b := r.buckets[key]
	if b == nil {
		b = rate.NewLimiter(r.limit, r.burst)
		r.buckets[key] = b
	}
	r.mu.Unlock()
	now := r.now()
	n = min(n, r.burst) // more could never be had
	res := b.ReserveN(now, n)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Streams caps the long-lived requests (subscriptions/listen streams) each
// API key holds open at once: the rate of requests alone lets a key pile
// up streams, each a connection and a file descriptor of the gateway's,
// until the gateway can open no more for anyone. It is safe for
// concurrent use.
type Streams struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

// NewStreams allows each key max streams at once (0 = DefaultMaxStreams).
func NewStreams(max int) *Streams {
	if max <= 0 {
		max = DefaultMaxStreams
	}
	return &Streams{max: max, open: map[string]int{}}
}

// Max is the streams a key may hold at once.
func (s *Streams) Max() int { return s.max }

// Open takes one of key's streams and returns the func that gives it back
// (call it once, when the stream ends); ok is false, and nothing is taken,
// when key holds Max already.
func (s *Streams) Open(key string) (done func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key] >= s.max {
		return nil, false
	}
	s.open[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.open[key]--; s.open[key] <= 0 {
				delete(s.open, key)
			}
		})
	}, true
}

// RetryAfter is the Retry-After value (whole seconds, at least 1) for a
// wait of d.
func RetryAfter(d time.Duration) string {
	return fmt.Sprint(max(1, int(math.Ceil(d.Seconds()))))
}

// OverRate is the audit reason of a request refused over its key's rate,
// answered with Retry-After: RetryAfter(after): the same whole seconds. It
// said the wait to the millisecond ("retry after 0s", "918ms") beside a
// header of 1.
func OverRate(after time.Duration) string {
	return "over the key's rate (retry after " + RetryAfter(after) + "s, as Retry-After says)"
}

// Defaults of the refused-request limit per client address
// (toolgate.limits.refusedPerMinute and refusedBurst).
const (
	// An honest client with a wrong or missing key retries a few times:
	// it gets its 401s (burst), then at worst waits a second for each.
	DefaultRefusedPerMinute = 60
	DefaultRefusedBurst     = 30
	// DefaultMaxAddresses bounds the addresses tracked (about 200 bytes
	// each); past it the least recently refused is forgotten.
	DefaultMaxAddresses = 10000
	// DefaultSummaryEvery is how often an address over its limit gets one
	// summary record of the requests refused unrecorded.
	DefaultSummaryEvery = time.Minute
)

// RefusalOptions configure Refusals. Nil means defaults.
type RefusalOptions struct {
	PerMinute    float64       // refused requests per minute per address (default DefaultRefusedPerMinute)
	Burst        int           // default DefaultRefusedBurst
	MaxAddresses int           // default DefaultMaxAddresses
	SummaryEvery time.Duration // default DefaultSummaryEvery
	// Summary, if set, is told, at most once per SummaryEvery for each
	// address, how many of its refused requests went over the limit
	// since the last time (answered 429, not recorded one by one).
	Summary func(addr string, n int, since time.Time)
}

// Refusals limits, per client address, the requests the HTTP front refuses
// before it knows a valid key (no key, a wrong one, a foreign Host or
// Origin): each of those is audited, so a flood from one address could
// rotate the audit log and erase earlier evidence. Under the limit a
// refused request is recorded; over it, it is answered 429 and only
// counted, and the count goes to Summary once per interval. Memory is
// bounded: at most MaxAddresses addresses (least recently refused
// forgotten first), and an address idle long enough for its bucket to
// refill is forgotten.
type Refusals struct {
	limit   rate.Limit
	burst   int
	max     int
	every   time.Duration
	idle    time.Duration // a bucket is full again after this
	summary func(string, int, time.Time)
	now     func() time.Time

	mu     sync.Mutex
	lru    *list.List // of *refused, most recent first
	byAddr map[string]*list.Element
	timer  *time.Timer // armed while some address has suppressed requests
	closed bool
}

type refused struct {
	addr       string
	bucket     *rate.Limiter
	seen       time.Time
	suppressed int
	since      time.Time // the first suppressed request of the count
}

// NewRefusals makes the limit (nil: defaults).
func NewRefusals(opts *RefusalOptions) *Refusals {
	var o RefusalOptions
	if opts != nil {
		o = *opts
	}
	if o.PerMinute <= 0 {
		o.PerMinute = DefaultRefusedPerMinute
	}
	if o.Burst <= 0 {
		o.Burst = DefaultRefusedBurst
	}
	if o.MaxAddresses <= 0 {
		o.MaxAddresses = DefaultMaxAddresses
	}
	if o.SummaryEvery <= 0 {
		o.SummaryEvery = DefaultSummaryEvery
	}
	perSecond := o.PerMinute / 60
	return &Refusals{
		limit: rate.Limit(perSecond), burst: o.Burst, max: o.MaxAddresses, every: o.SummaryEvery,
		idle:    time.Duration(float64(o.Burst) / perSecond * float64(time.Second)),
		summary: o.Summary, now: time.Now,
		lru: list.New(), byAddr: map[string]*list.Element{},
	}
}

// Refuse counts one refused request from remoteAddr (an http.Request's
// RemoteAddr). record is true under the limit: refuse as usual and audit
// it. Otherwise answer 429 with Retry-After retryAfter and do not audit
// it: it is counted for the address's next summary.
func (r *Refusals) Refuse(remoteAddr string) (record bool, retryAfter time.Duration) {
	return r.Count(AddressOf(remoteAddr))
}

// Count is Refuse for a refusal of id, whatever it names (an address, an
// API key: Rates.RecordOver).
func (r *Refusals) Count(addr string) (record bool, retryAfter time.Duration) {
	now := r.now()
	var gone []refused
	defer func() { r.report(gone) }() // after the unlock
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.lookup(addr, now, &gone)
	e.seen = now
	res := e.bucket.ReserveN(now, 1)
	d := res.DelayFrom(now)
	if d <= 0 {
		return true, 0
	}
	res.CancelAt(now)
	if e.suppressed == 0 {
		e.since = now
	}
	e.suppressed++
	if r.timer == nil && !r.closed && r.summary != nil {
		r.timer = time.AfterFunc(r.every, r.Flush)
	}
	return false, d
}

// lookup is addr's entry, made (and the oldest forgotten) as needed;
// forgotten addresses with suppressed requests go to gone. r.mu is held.
func (r *Refusals) lookup(addr string, now time.Time, gone *[]refused) *refused {
	if el := r.byAddr[addr]; el != nil {
		r.lru.MoveToFront(el)
		return el.Value.(*refused)
	}
	// Forget the addresses idle long enough to have a full bucket, and
	// the least recently refused one while at the cap.
	for el := r.lru.Back(); el != nil; el = r.lru.Back() {
		e := el.Value.(*refused)
		if r.lru.Len() < r.max && now.Sub(e.seen) < r.idle {
			break
		}
		r.lru.Remove(el)
		delete(r.byAddr, e.addr)
		if e.suppressed > 0 {
			*gone = append(*gone, *e)
		}
	}
	e := &refused{addr: addr, bucket: rate.NewLimiter(r.limit, r.burst)}
	r.byAddr[addr] = r.lru.PushFront(e)
	return e
}

// report tells Summary of the suppressed requests of es (r.mu not held:
// Summary may write to a log).
func (r *Refusals) report(es []refused) {
	if r.summary == nil {
		return
	}
	for _, e := range es {
		r.summary(e.addr, e.suppressed, e.since)
	}
}

// Flush reports every address's suppressed requests now (the interval's
// timer calls it; so does Close).
func (r *Refusals) Flush() {
	var due []refused
	r.mu.Lock()
	r.timer = nil
	for el := r.lru.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*refused); e.suppressed > 0 {
			due = append(due, *e)
			e.suppressed = 0
		}
	}
	r.mu.Unlock()
	r.report(due)
}

// Close reports what is still suppressed and stops the timer.
func (r *Refusals) Close() {
	r.mu.Lock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	r.Flush()
}

// Tracked is how many addresses the limit holds.
func (r *Refusals) Tracked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}

// AddressOf is the client address a limit is kept for: the host of
// remoteAddr (host:port) without its port, an IPv6 address's /64 network
// (one host can hold a whole /64), "" when remoteAddr is not an address.
func AddressOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() && !ip.IsLoopback() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
