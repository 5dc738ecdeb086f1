package llm

import "testing"

// TestCallCost pins the order in which a call is priced: the provider's
// own cost, then the model that answered, then the model asked for.
func TestCallCost(t *testing.T) {
	u := Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}
	for _, c := range []struct {
		requested, answered string
		reported, want      float64
		known               bool
	}{
		{"gpt-4o-mini", "gpt-4o-mini-2024-07-18", 0, 0.75, true},
		{"gpt-4o-mini", "m", 0, 0.75, true}, // the server's own name: the requested price
		{"gpt-4o-mini", "", 0, 0.75, true},
		{"gpt-4o-mini", "gpt-4o", 0, 12.5, true}, // another priced model answered
		{"unpriced-rlm17", "m", 0, 0, false},
		{"unpriced-rlm17", "m", 0.3, 0.3, true}, // the provider reported it
	} {
		got, known := CallCost(c.requested, Response{Model: c.answered, Usage: u, CostUSD: c.reported})
		if got != c.want || known != c.known {
			t.Errorf("CallCost(%q, answered %q, reported %v) = %v, %v; want %v, %v", c.requested, c.answered, c.reported, got, known, c.want, c.known)
		}
	}
}
