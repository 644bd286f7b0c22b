package rollout

import (
	"math"
	"testing"
)

// TestExponential compares Exponential with the seed's formula,
// indexOf(item, collection) < int(math.pow(2, math.ceil(math.log(double(u + 1)) / math.log(2.0)))),
// for every u up to 64 and every index of a collection twice as large.
func TestExponential(t *testing.T) {
	for u := range 65 {
		batch := int(math.Pow(2, math.Ceil(math.Log(float64(u+1))/math.Log(2.0))))
		for i := range 130 {
			if got, want := Exponential(i, u), i < batch; got != want {
				t.Errorf("Exponential(index %d, updated %d) = %t, want %t (the seed's batch is %d)", i, u, got, want, batch)
			}
		}
	}
	if Exponential(-1, 0) || Exponential(0, -1) {
		t.Error("Exponential: a negative index or count lets nothing through")
	}
}

// TestLinear compares Linear with the seed's formula,
// indexOf(item, collection) < (updated / n + 1) * n.
func TestLinear(t *testing.T) {
	for n := 1; n <= 5; n++ {
		for u := range 65 {
			for i := range 130 {
				if got, want := Linear(i, u, n), i < (u/n+1)*n; got != want {
					t.Errorf("Linear(index %d, updated %d, n %d) = %t, want %t", i, u, n, got, want)
				}
			}
		}
	}
	if Linear(0, 0, 0) || Linear(0, 0, -3) {
		t.Error("Linear: a batch size below 1 lets nothing through")
	}
}
