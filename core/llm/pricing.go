package llm

import "github.com/rlmkit/rlm/core/llm/pricing"

// Price is a model's list price in US dollars per million tokens
// (core/llm/pricing, where the table lives).
type Price = pricing.Price

// SetPrices adds or replaces prices (keys are model names as in [Cost]).
func SetPrices(p map[string]Price) { pricing.SetPrices(p) }

// LookupPrice finds the price of model (see pricing.LookupPrice).
func LookupPrice(model string) (Price, bool) { return pricing.LookupPrice(model) }

// Cost is the price in US dollars of usage on model, and whether the model's
// price is known (an unknown model costs 0, so a budget can warn about it
// rather than silently pass).
func Cost(model string, u Usage) (usd float64, known bool) {
	p, ok := LookupPrice(model)
	if !ok {
		return 0, false
	}
	return (float64(u.InputTokens)*p.InputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6, true
}
