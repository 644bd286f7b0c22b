// Package memo holds bounded caches of what was compiled from a key: the
// CEL of AllowancePolicies, of propagation plans and of roll-outs, which
// the function and the webhooks would otherwise compile on every request
// although it changes only when a policy or a Composition does.
package memo

import "sync"

// A Cache maps keys to what computing them returned, error included: a
// compilation is a function of its key, so its error is as stable as its
// result. It is bounded: reaching Max means churn (keys nothing names any
// more), and starting over is cheaper than tracking use. It is safe for
// concurrent use; two callers missing the same key at once both compute,
// and either result is kept.
type Cache[V any] struct {
	mu  sync.Mutex
	m   map[string]entry[V]
	max int
}

type entry[V any] struct {
	v   V
	err error
}

// New returns an empty Cache of at most limit entries.
func New[V any](limit int) *Cache[V] {
	return &Cache[V]{m: map[string]entry[V]{}, max: limit}
}

// Get returns what compute returned for key, computing it on the first
// call for key (or the first since the cache started over). A nil Cache
// computes on every call.
func (c *Cache[V]) Get(key string, compute func() (V, error)) (V, error) {
	if c == nil {
		return compute()
	}
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return e.v, e.err
	}
	// Outside the lock: compiling takes milliseconds, and other keys
	// must not wait for it.
	v, err := compute()
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[key] = entry[V]{v: v, err: err}
	c.mu.Unlock()
	return v, err
}

// Len is how many keys the cache holds.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
