// Package pricing holds the models' list prices, apart from the provider
// clients: the configuration reads and sets them (the [pricing] table of
// rlm.toml) without linking the providers' SDKs, which every command that
// loads the configuration would otherwise start with.
package pricing

import (
	"regexp"
	"strings"
	"sync"
)

// Price is a model's list price in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok" toml:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok" toml:"output_per_mtok"`
}

// builtinPrices are the providers' published list prices (standard tier, no
// caching or batch discount) for common models at the time of writing.
// Prices change: override or extend them with [SetPrices] from the
// [pricing] table of rlm.toml.
var builtinPrices = map[string]Price{
	// Anthropic
	"claude-opus-4-5":   {5, 25},
	"claude-opus-4-1":   {15, 75},
	"claude-opus-4-0":   {15, 75},
	"claude-opus-4":     {15, 75},
	"claude-sonnet-4-5": {3, 15},
	"claude-sonnet-4-0": {3, 15},
	"claude-sonnet-4":   {3, 15},
	"claude-haiku-4-5":  {1, 5},
	"claude-3-7-sonnet": {3, 15},
	"claude-3-5-sonnet": {3, 15},
	"claude-3-5-haiku":  {0.80, 4},
	"claude-3-opus":     {15, 75},
	"claude-3-haiku":    {0.25, 1.25},
	// OpenAI
	"gpt-5":         {1.25, 10},
	"gpt-5-mini":    {0.25, 2},
	"gpt-5-nano":    {0.05, 0.40},
	"gpt-5-pro":     {15, 120},
	"gpt-4.1":       {2, 8},
	"gpt-4.1-mini":  {0.40, 1.60},
	"gpt-4.1-nano":  {0.10, 0.40},
	"gpt-4o":        {2.50, 10},
	"gpt-4o-mini":   {0.15, 0.60},
	"gpt-4-turbo":   {10, 30},
	"gpt-3.5-turbo": {0.50, 1.50},
	"o1":            {15, 60},
	"o1-mini":       {1.10, 4.40},
	"o3":            {2, 8},
	"o3-mini":       {1.10, 4.40},
	"o3-pro":        {20, 80},
	"o4-mini":       {1.10, 4.40},
}

var (
	pricesMu sync.RWMutex
	prices   = clonePrices(builtinPrices)
)

func clonePrices(m map[string]Price) map[string]Price {
	c := make(map[string]Price, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// SetPrices adds or replaces prices (keys are model names as in [Cost]).
// It is meant for configuration at start-up and is safe for concurrent use.
func SetPrices(p map[string]Price) {
	pricesMu.Lock()
	defer pricesMu.Unlock()
	for k, v := range p {
		prices[strings.ToLower(k)] = v
	}
}

// LookupPrice finds the price of model. Besides an exact match it accepts a
// dated snapshot of a listed alias ("claude-sonnet-4-5-20250929",
// "gpt-4o-2024-08-06", "claude-sonnet-4-5@20250929") and a router prefix
// ("anthropic/claude-sonnet-4-5", "openai/gpt-4o"). It does not guess
// beyond that: "gpt-5-pro" is not priced as "gpt-5".
func LookupPrice(model string) (Price, bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	pricesMu.RLock()
	defer pricesMu.RUnlock()
	for _, cand := range priceCandidates(m) {
		if p, ok := prices[cand]; ok {
			return p, true
		}
	}
	return Price{}, false
}

var snapshotSuffix = regexp.MustCompile(`(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2}|latest))$`)

func priceCandidates(m string) []string {
	c := []string{m}
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:]
		c = append(c, m)
	}
	if s := snapshotSuffix.ReplaceAllString(m, ""); s != m {
		c = append(c, s)
	}
	return c
}
