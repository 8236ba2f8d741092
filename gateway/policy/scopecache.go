package policy

import (
	"sync"
	"sync/atomic"
)

// scopeCache keeps what a snapshot made for each caller scope (a search
// filter, a Sight), up to max entries, lock-free for readers. One entry
// more evicts one entry, taken at random, rather than all of them: a
// shared gateway's callers come round robin (200 keys, each on /mcp and
// a profile's route), and a cache that started over once full made every
// entry again at every request once the scopes outnumbered it — at 600
// scopes and a bound of 256, each search of each key rebuilt its filter
// over the whole catalog. With one evicted at random, scopes past the
// bound cost only the misses they cause.
type scopeCache[V any] struct {
	max int
	m   sync.Map // scope key → V
	n   atomic.Int64
}

func (c *scopeCache[V]) load(key string) (V, bool) {
	v, ok := c.m.Load(key)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

// add keeps v for key unless another caller of the same scope kept one
// first, and returns the one kept.
func (c *scopeCache[V]) add(key string, v V) V {
	actual, loaded := c.m.LoadOrStore(key, v)
	if !loaded {
		c.added(key)
	}
	return actual.(V)
}

// put keeps v for key, in place of what key had.
func (c *scopeCache[V]) put(key string, v V) {
	if _, loaded := c.m.Swap(key, v); !loaded {
		c.added(key)
	}
}

// added counts a new entry, key's, and evicts another while over max.
func (c *scopeCache[V]) added(key string) {
	if c.n.Add(1) <= int64(c.max) {
		return
	}
	// The first in sync.Map's order (hash order) that is not key.
	c.m.Range(func(k, _ any) bool {
		if k == key {
			return true
		}
		if _, ok := c.m.LoadAndDelete(k); ok {
			c.n.Add(-1)
		}
		return false
	})
}

// len is how many entries the cache holds.
func (c *scopeCache[V]) len() int { return int(c.n.Load()) }
