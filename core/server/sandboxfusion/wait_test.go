package sandboxfusion

import (
	"testing"
	"time"
)

// TestSlotWaitFitsVerlsPatience holds the wait for a slot inside what
// verl's client waits for an answer (compile_timeout + run_timeout + 10 s)
// once the run's own wall clock is spent, and no shorter than that needs.
func TestSlotWaitFitsVerlsPatience(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		name     string
		req      Request
		compiled bool
		want     time.Duration
	}{
		{"python defaults", Request{}, false, 15 * time.Second},
		{"cpp defaults", Request{}, true, 5 * time.Second},
		{"python short", Request{RunTimeout: f(1), CompileTimeout: f(1)}, false, 6 * time.Second},
		{"python long run", Request{RunTimeout: f(30)}, false, 15 * time.Second},
		{"tiny patience", Request{RunTimeout: f(0.5), CompileTimeout: f(0.1)}, true, 5 * time.Second},
	} {
		req := c.req
		if got := slotWait(&req, c.compiled); got != c.want {
			t.Errorf("%s: slotWait = %s, want %s", c.name, got, c.want)
		}
	}
}
