package memo

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestCache(t *testing.T) {
	errBad := errors.New("bad")
	calls := map[string]int{}
	compute := func(key string) func() (string, error) {
		return func() (string, error) {
			calls[key]++
			if key == "bad" {
				return "", errBad
			}
			return "compiled " + key, nil
		}
	}
	c := New[string](3)
	for range 2 {
		if v, err := c.Get("a", compute("a")); v != "compiled a" || err != nil {
			t.Fatalf("Get(a) = %q, %v", v, err)
		}
		if _, err := c.Get("bad", compute("bad")); !errors.Is(err, errBad) {
			t.Fatalf("Get(bad) error = %v, want %v", err, errBad)
		}
	}
	if calls["a"] != 1 || calls["bad"] != 1 {
		t.Errorf("computed a %d times and bad %d times, want once each: a result and an error are both kept", calls["a"], calls["bad"])
	}
	for i := range 5 {
		k := fmt.Sprint(i)
		if _, err := c.Get(k, compute(k)); err != nil {
			t.Fatal(err)
		}
		if c.Len() > 3 {
			t.Fatalf("after %d more keys the cache holds %d, more than its bound 3", i+1, c.Len())
		}
	}
	if _, err := c.Get("a", compute("a")); err != nil || calls["a"] != 2 {
		t.Errorf("a after the cache started over: computed %d times, want 2", calls["a"])
	}
}

// TestCacheConcurrent: concurrent callers of many keys get each key's own
// result (go test -race checks the locking).
func TestCacheConcurrent(t *testing.T) {
	c := New[string](8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := fmt.Sprint((g + i) % 16)
				if v, _ := c.Get(k, func() (string, error) { return "v" + k, nil }); v != "v"+k {
					t.Errorf("Get(%s) = %s", k, v)
					return
				}
			}
		}()
	}
	wg.Wait()
}
