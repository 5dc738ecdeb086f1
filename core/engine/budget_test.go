package engine

import (
	"testing"
	"time"
)

// A run whose calls had no known price must not read as free.
func TestUsageCostText(t *testing.T) {
	for _, c := range []struct {
		u    Usage
		want string
	}{
		{Usage{}, "$0.0000"},
		{Usage{Calls: 2, CostUSD: 0.0123}, "$0.0123"},
		{Usage{Calls: 2, UnpricedCalls: 2}, "price unknown"},
		{Usage{Calls: 5, UnpricedCalls: 2, CostUSD: 0.5}, "$0.5000 + price unknown for 2 of 5 calls"},
	} {
		if got := c.u.CostText(); got != c.want {
			t.Errorf("%+v: CostText() = %q, want %q", c.u, got, c.want)
		}
	}
}

// The meter counts the calls it had no price for.
func TestMeterCountsUnpricedCalls(t *testing.T) {
	m := newMeter(Budget{}, time.Now())
	m.add(1, 1, 0, false, "a", "")
	m.add(1, 1, 0.1, true, "b", "")
	if u := m.snapshot(); u.UnpricedCalls != 1 || u.Calls != 2 {
		t.Fatalf("usage %+v: want 1 unpriced of 2 calls", u)
	}
}
