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

// CallCost is the cost of one call that asked for model requested and got
// resp, and whether it is known. It is the one pricing decision of a call,
// made by the provider wrapper and again by the engine's meter so that both
// agree whatever the provider:
//
//   - a cost the provider reported (resp.CostUSD > 0: claude-code, replay)
//     is taken as is;
//   - else the price of resp.Model, the model that answered, which may be
//     a dated snapshot or another model than the one asked for;
//   - else the price of requested: an OpenAI-compatible server (vLLM,
//     LiteLLM, a proxy) may name its model in its own way ("m", a file
//     path), and a call of a model the user asked for by a priced name must
//     not then count as free, or a cost budget would silently stop holding;
//   - else 0 and false, so that the caller can warn that a budget cannot
//     hold.
func CallCost(requested string, resp Response) (usd float64, known bool) {
	if resp.CostUSD > 0 {
		return resp.CostUSD, true
	}
	if usd, ok := Cost(resp.Model, resp.Usage); ok {
		return usd, true
	}
	return Cost(requested, resp.Usage)
}
