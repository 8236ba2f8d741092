package audit

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// An API key's refusals cost the log a record each, and a refusal is the
// cheapest request a key can make: one key sending a tool it may not run
// (or one that does not exist) at its rate filled the six files of the
// default log in about 23 minutes, rotating every other key's earlier
// records out. So a key's refusals are coalesced: the first of a kind in a
// window is written at once, as before; the same refusal again within the
// window (the same key, action, tool, decision, reason …) is only counted,
// and when the window ends one record with Count, FirstTime and LastTime
// stands for them. A key that varies the tool or the reason opens at most
// CoalesceKinds kinds a window; its other refusals of names the gateway
// does not have (Record.Unlisted) share one record per decision, action
// and status, after the first of each written in full. Allowed calls are
// never coalesced: each is evidence of its own.

// Defaults of Options' coalescing.
const (
	DefaultCoalesce      = time.Minute
	DefaultCoalesceKinds = 32
	// maxGroups bounds the kinds held at once over all keys (a few
	// hundred bytes each); past it a refusal is written on its own.
	maxGroups = 10000
)

// ToolsCall is the action of a tools/call the gateway refused before any
// tool ran: a tool it does not show (a model calling a backend's tool
// directly).
const ToolsCall = "tools/call"

// coalescible reports whether r is a refusal of an API key: denied,
// rate-limited or quarantined, or a call that ran nothing (Refused). A
// record that already counts others (a summary) is written as it is.
func coalescible(r *Record) bool {
	if r.Key == "" || r.Count != 0 {
		return false
	}
	switch r.Decision {
	case Denied, RateLimited, Quarantined:
		return true
	}
	return r.Refused || r.Action == ToolsCall
}

// kind is what makes two refusals the same: every field audit tail
// filters on or a reader tells refusals apart by. What varies from one
// request to the next (time, session, client, remote address, duration,
// arguments) does not; the summary keeps the last refusal's.
type kind struct {
	key, transport, action, tool, server, decision, outcome, reason string
	route, profile, keyProfile, config, managedKey                  string
	status                                                          int
	// other is the key's refusals past its kinds in the window, of one
	// decision, action and status: only those and key are set.
	other bool
}

func kindOf(r *Record) kind {
	return kind{key: r.Key, transport: r.Transport, action: r.Action, tool: r.Tool, server: r.Server, decision: r.Decision,
		outcome: r.Outcome, reason: r.Reason, route: r.Route, profile: r.Profile, keyProfile: r.KeyProfile, config: r.Config,
		managedKey: r.ManagedKey, status: r.Status}
}

// group is one kind's refusals in the window that began at opened (when
// the one written in full reached the log, by the gateway's clock).
type group struct {
	opened time.Time
	// first and latest are the earliest and latest times counted (calls
	// running at once may queue their records out of order).
	first, latest time.Time
	last          Record // the last one counted
	count         int
}

// coalescer holds the open kinds. Its methods are safe for concurrent use.
type coalescer struct {
	window time.Duration
	kinds  int

	mu     sync.Mutex
	groups map[kind]*group
	perKey map[string]int // kinds open per key (other groups not counted)
	ready  []Record       // summaries of groups closed by add, for the writer

	coalesced atomic.Uint64
}

func newCoalescer(window time.Duration, kinds int) *coalescer {
	return &coalescer{window: window, kinds: kinds, groups: map[kind]*group{}, perKey: map[string]int{}}
}

// add reports whether r was counted into a group (not to be written now).
// A refusal that opens a group is written: the first of each kind is in
// the file at once. at is when r reached the log, by the gateway's own
// clock (time.Now, monotonic): a window is a span of elapsed time, so a
// step of the wall clock (r.Time) neither holds one open for an hour nor
// closes it early.
func (c *coalescer) add(r *Record, at time.Time) bool {
	k := kindOf(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[k]; g != nil {
		if at.Before(g.opened.Add(c.window)) {
			c.fold(g, r)
			return true
		}
		c.close(k, g)
	}
	// Only a name a client made up goes to the key's other refusals: a
	// refusal of a tool that exists opens a kind of its own, however many
	// the key has (there are as many as the catalog's tools at most).
	// The other refusals are grouped by decision, action and status,
	// which the gateway's code sets (a handful), and the first of each
	// group is written in full: a revoked key's first 401 after its
	// made-up tools is in the file at once, not a minute later among them.
	if c.perKey[r.Key] >= c.kinds && r.Unlisted {
		o := kind{key: r.Key, decision: r.Decision, action: r.Action, status: r.Status, other: true}
		g := c.groups[o]
		if g != nil && !at.Before(g.opened.Add(c.window)) {
			c.close(o, g)
			g = nil
		}
		if g != nil {
			c.fold(g, r)
			return true
		}
		if len(c.groups) >= maxGroups {
			return false
		}
		c.groups[o] = &group{opened: at}
		return false
	}
	if len(c.groups) >= maxGroups {
		return false
	}
	c.groups[k] = &group{opened: at}
	c.perKey[r.Key]++
	return false
}

func (c *coalescer) fold(g *group, r *Record) {
	if g.count == 0 || r.Time.Before(g.first) {
		g.first = r.Time
	}
	if r.Time.After(g.latest) {
		g.latest = r.Time
	}
	g.count++
	g.last = *r
	c.coalesced.Add(1)
}

// close removes the group of k, its summary (if it counted any) left for
// the writer. The caller holds mu.
func (c *coalescer) close(k kind, g *group) {
	delete(c.groups, k)
	if !k.other {
		if c.perKey[k.key]--; c.perKey[k.key] <= 0 {
			delete(c.perKey, k.key)
		}
	}
	if g.count > 0 {
		c.ready = append(c.ready, c.summary(k, g))
	}
}

// summary is the record that stands for g's refusals: the last one's
// fields, with how many and from when to when.
func (c *coalescer) summary(k kind, g *group) Record {
	r := g.last
	r.Count, r.FirstTime, r.LastTime = g.count, g.first, g.latest
	r.Time = g.latest
	if k.other {
		// Of several tools or reasons: the last one named in the reason,
		// no tool or server of its own that --tool or --server would
		// take for all of them.
		what := r.Action
		if r.Tool != "" {
			what += " " + r.Tool
		}
		r.Reason = fmt.Sprintf("%d more refusals (%s) of API key %q in %s, of tools or for reasons other than the %d kinds recorded one by one (the last: %s: %s)",
			g.count, k.decision, k.key, c.window, c.kinds, what, r.Reason)
		r.Tool, r.Server, r.ArgumentsSHA256, r.Arguments = "", "", "", nil
	}
	r.clip()
	return r
}

// due closes the groups whose window has ended by now (every group when
// all) and returns the summaries to write, oldest first.
func (c *coalescer) due(now time.Time, all bool) []Record {
	c.mu.Lock()
	for k, g := range c.groups {
		if all || !now.Before(g.opened.Add(c.window)) {
			c.close(k, g)
		}
	}
	out := c.ready
	c.ready = nil
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Record) int { return a.Time.Compare(b.Time) })
	return out
}
