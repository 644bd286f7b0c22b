// Package recorder is a recording test provider: crossplane-runtime's real
// managed reconciler, with management policies enabled, for one managed
// resource kind (Bucket), whose external client records every call it makes
// against an in-memory fake cloud, so tests can assert exactly what the cloud
// saw.
package recorder

import (
	"errors"
	"maps"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// Verbs of the calls the external client makes against the Cloud.
const (
	VerbObserve = "Observe"
	VerbCreate  = "Create"
	VerbUpdate  = "Update"
	VerbDelete  = "Delete"
)

// State is the state of one external bucket in the Cloud.
type State struct {
	Size   int64
	Region string
	Tags   map[string]string
}

// Call is one call the external client made against the Cloud.
type Call struct {
	// Verb is one of Observe, Create, Update or Delete.
	Verb string
	// Kind is the managed resource's kind; empty for Buckets.
	Kind string
	// Name is the external name of the bucket or resource.
	Name string
	// Size is the size written by a Create or Update; zero for Observe and
	// Delete.
	Size int64
	// Spec is what a Create or Update of a resource wrote (its
	// spec.forProvider); nil for Buckets and other verbs.
	Spec map[string]any
}

// Cloud is a concurrency-safe fake external system: buckets by name, plus a
// log of every call made against it.
type Cloud struct {
	mu      sync.Mutex
	buckets map[string]State
	objects map[string]map[string]any // by kind and external name
	calls   []Call
	held    map[string]chan struct{}
	failing map[string]bool
}

// NewCloud returns an empty Cloud.
func NewCloud() *Cloud {
	return &Cloud{buckets: map[string]State{}, objects: map[string]map[string]any{}, held: map[string]chan struct{}{}, failing: map[string]bool{}}
}

// Hold makes the next writes to the named bucket wait until release is
// called, as a slow cloud API would; tests use it to act while a write is
// in flight.
func (c *Cloud) Hold(name string) (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	c.held[name] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.held, name)
			c.mu.Unlock()
			close(ch)
		})
	}
}

// HoldPrefix is Hold for every bucket whose name starts with prefix, for a
// bucket whose name is not known before Crossplane composes it.
func (c *Cloud) HoldPrefix(prefix string) (release func()) {
	return c.Hold(prefix + heldPrefix)
}

// heldPrefix marks a key of Cloud.held as a prefix (bucket names never end
// in "*").
const heldPrefix = "*"

// errFailing is what a write to a failing bucket returns.
var errFailing = errors.New("the cloud API refuses writes to this bucket")

// Fail makes every Create and Update of the named bucket fail, unrecorded,
// until restore is called, as a cloud API that keeps refusing a change
// would: the provider retries, and the change stays unapplied.
func (c *Cloud) Fail(name string) (restore func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failing[name] = true
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.failing, name)
	}
}

// FailPrefix is Fail for every bucket whose name starts with prefix, for a
// bucket whose name is not known before Crossplane composes it.
func (c *Cloud) FailPrefix(prefix string) (restore func()) {
	return c.Fail(prefix + heldPrefix)
}

// failingLocked reports whether writes to the named bucket fail, by name
// or by a prefix. c.mu is held.
func (c *Cloud) failingLocked(name string) bool {
	for k := range c.failing {
		if k == name || (strings.HasSuffix(k, heldPrefix) && strings.HasPrefix(name, strings.TrimSuffix(k, heldPrefix))) {
			return true
		}
	}
	return false
}

// wait blocks while the named bucket is held, by name or by a prefix.
func (c *Cloud) wait(name string) {
	c.mu.Lock()
	var held []chan struct{}
	for k, ch := range c.held {
		if k == name || (strings.HasSuffix(k, heldPrefix) && strings.HasPrefix(name, strings.TrimSuffix(k, heldPrefix))) {
			held = append(held, ch)
		}
	}
	c.mu.Unlock()
	for _, ch := range held {
		<-ch
	}
}

// Calls returns a copy of the call log, oldest first.
func (c *Cloud) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.calls...)
}

// Count returns how many calls with the supplied verb were made for the
// supplied name.
func (c *Cloud) Count(verb, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, call := range c.calls {
		if call.Verb == verb && call.Name == name {
			n++
		}
	}
	return n
}

// Get returns the state of the named bucket, and whether it exists.
func (c *Cloud) Get(name string) (State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.buckets[name]
	if !ok {
		return State{}, false
	}
	s.Tags = maps.Clone(s.Tags)
	return s, true
}

// Put seeds or overwrites the named bucket without recording a call, e.g. an
// external resource that exists before its managed resource.
func (c *Cloud) Put(name string, s State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Tags = maps.Clone(s.Tags)
	c.buckets[name] = s
}

// Reset removes every bucket and clears the call log.
func (c *Cloud) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buckets = map[string]State{}
	c.objects = map[string]map[string]any{}
	c.calls = nil
}

// observe records an Observe call and returns the named bucket.
func (c *Cloud) observe(name string) (State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, Call{Verb: VerbObserve, Name: name})
	s, ok := c.buckets[name]
	s.Tags = maps.Clone(s.Tags)
	return s, ok
}

// write records a Create or Update call and stores the bucket; a failing
// bucket's write fails and is not recorded.
func (c *Cloud) write(verb, name string, s State) error {
	c.wait(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failingLocked(name) {
		return errFailing
	}
	c.calls = append(c.calls, Call{Verb: verb, Name: name, Size: s.Size})
	s.Tags = maps.Clone(s.Tags)
	c.buckets[name] = s
	return nil
}

// remove records a Delete call and removes the bucket.
func (c *Cloud) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, Call{Verb: VerbDelete, Name: name})
	delete(c.buckets, name)
}

func objectKey(kind, name string) string { return kind + "/" + name }

// GetObject returns what the Cloud holds of the resource of kind named
// name (its spec.forProvider as last written), and whether it exists.
func (c *Cloud) GetObject(kind, name string) (map[string]any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.objects[objectKey(kind, name)]
	return runtime.DeepCopyJSON(s), ok
}

// CountObject returns how many calls with verb were made for the resource
// of kind named name.
func (c *Cloud) CountObject(verb, kind, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, call := range c.calls {
		if call.Verb == verb && call.Kind == kind && call.Name == name {
			n++
		}
	}
	return n
}

// Created returns what the Create of the resource of kind named name
// wrote, and whether there was one.
func (c *Cloud) Created(kind, name string) (map[string]any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, call := range c.calls {
		if call.Verb == VerbCreate && call.Kind == kind && call.Name == name {
			return runtime.DeepCopyJSON(call.Spec), true
		}
	}
	return nil, false
}

// PutObject overwrites what the Cloud holds of the resource of kind named
// name without recording a call: a change made in the cloud's console,
// behind Crossplane's back (drift).
func (c *Cloud) PutObject(kind, name string, s map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects[objectKey(kind, name)] = runtime.DeepCopyJSON(s)
}

func (c *Cloud) observeObject(kind, name string) (map[string]any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, Call{Verb: VerbObserve, Kind: kind, Name: name})
	s, ok := c.objects[objectKey(kind, name)]
	return runtime.DeepCopyJSON(s), ok
}

func (c *Cloud) writeObject(verb, kind, name string, s map[string]any) error {
	c.wait(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failingLocked(name) {
		return errFailing
	}
	c.calls = append(c.calls, Call{Verb: verb, Kind: kind, Name: name, Spec: runtime.DeepCopyJSON(s)})
	c.objects[objectKey(kind, name)] = runtime.DeepCopyJSON(s)
	return nil
}

func (c *Cloud) removeObject(kind, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, Call{Verb: VerbDelete, Kind: kind, Name: name})
	delete(c.objects, objectKey(kind, name))
}
