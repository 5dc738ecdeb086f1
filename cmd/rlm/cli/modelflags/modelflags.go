// Package modelflags is the one place that turns flags, rlm.toml ([run],
// [providers], [pricing], [sessions]) and the environment into a model
// provider: `rlm run` uses [Resolve] for its loop, and rlm serve, rlm mcp
// and rlm exec --context use [Sessions] for the llm_query of their REPL
// sessions, with the same flag names, keys and precedence (flag > task
// file > environment > rlm.toml > default).
package modelflags

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

// DefaultProvider is `rlm run`'s provider when none is chosen.
const DefaultProvider = "anthropic"

// DefaultModels are the models used when none is configured.
var DefaultModels = map[string]string{
	"anthropic": "claude-sonnet-4-5",
	"openai":    "gpt-4o",
	"ollama":    "llama3.1",
}

// Choice is what a command chose itself (its flags, a task file), ""
// where it chose nothing; [Resolve] layers it over rlm.toml.
type Choice struct {
	Provider, Model, SubcallModel, BaseURL, Transcript string
}

// Model is a resolved provider configuration.
type Model struct {
	Provider     string
	Model        string
	SubcallModel string
	Options      llm.Options
	// Chosen is true when the provider was chosen (Choice, $RLM_PROVIDER
	// or [run] provider) rather than defaulted.
	Chosen bool
}

// Resolve applies choice > environment > rlm.toml > default.
func Resolve(cfg config.Config, c Choice) (Model, error) {
	rc := cfg.Run
	m := Model{Provider: first(c.Provider, rc.Provider)}
	m.Chosen = m.Provider != ""
	if m.Provider == "" {
		m.Provider = DefaultProvider
	}
	if !slices.Contains(llm.Providers(), m.Provider) {
		return m, fmt.Errorf("unknown provider %q: use one of %s", m.Provider, strings.Join(llm.Providers(), ", "))
	}
	m.Model = first(c.Model, rc.Model, DefaultModels[m.Provider])
	m.SubcallModel = first(c.SubcallModel, rc.SubcallModel, m.Model)
	pc := cfg.Providers[m.Provider]
	m.Options = llm.Options{
		BaseURL:       first(c.BaseURL, pc.BaseURL),
		APIKey:        pc.APIKey,
		Timeout:       time.Duration(pc.Timeout),
		MaxRetries:    pc.MaxRetries,
		MaxConcurrent: rc.MaxConcurrent,
		Transcript:    first(c.Transcript, pc.Transcript),
		Command:       pc.Command,
	}
	if m.Provider == "replay" && m.Options.Transcript == "" {
		return m, fmt.Errorf("the replay provider needs a transcript: pass --transcript TRACE (a file written by --trace), set transcript in the task file or [providers.replay] transcript in rlm.toml")
	}
	return m, nil
}

// selfPricing are the providers that report each call's cost themselves,
// so that a cost cap holds whatever the model.
var selfPricing = map[string]bool{"claude-code": true, "replay": true}

// CheckPriced refuses a cost cap (maxCost > 0) for a model without a known
// price: the cap could not be enforced, and a warning alone is easy to
// miss. Call it after llm.SetPrices(cfg.Pricing).
func CheckPriced(provider string, maxCost float64, models ...string) error {
	if maxCost <= 0 || selfPricing[provider] {
		return nil
	}
	for _, m := range models {
		if m == "" {
			continue
		}
		if _, ok := llm.LookupPrice(m); !ok {
			return fmt.Errorf("--max-cost cannot be enforced: rlm knows no price for model %q; give one in rlm.toml ([pricing.\"%s\"] input_per_mtok = ..., output_per_mtok = ...) or drop --max-cost", m, m)
		}
	}
	return nil
}

// SessionFlags are the model flags of the commands that serve REPL
// sessions (serve, mcp, exec): the names of `rlm run`'s, budgets per
// session instead of per run.
type SessionFlags struct {
	Provider      string
	Model         string
	BaseURL       string
	MaxCost       float64
	MaxTokens     int64
	MaxCalls      int
	MaxCallTokens int
	AllowModels   []string

	fs *pflag.FlagSet
}

// Register adds the flags to fs.
func (f *SessionFlags) Register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.Provider, "provider", "", "model provider for llm_query in sessions: "+strings.Join(llm.Providers(), ", ")+" (default from config: none, llm_query is off)")
	fs.StringVar(&f.Model, "model", "", "model answering llm_query (default: [run] subcall_model, model, else the provider's)")
	fs.StringVar(&f.BaseURL, "base-url", "", "the provider's endpoint (OpenAI-compatible servers, a local Ollama...)")
	fs.Float64Var(&f.MaxCost, "max-cost", 0, "cost cap of each session's llm_query calls in USD (default from config: none)")
	fs.Int64Var(&f.MaxTokens, "max-tokens", 0, "token cap of each session's llm_query calls (default from config: none)")
	fs.IntVar(&f.MaxCalls, "max-calls", 0, "llm_query calls each session may make (default from config: unlimited)")
	fs.IntVar(&f.MaxCallTokens, "max-call-tokens", 0, "tokens of each llm_query reply (default: the provider's)")
	fs.StringSliceVar(&f.AllowModels, "allow-model", nil, "a model besides --model that sessions may choose (repeatable; adds to [sessions] allow_models)")
}

func (f *SessionFlags) changed(name string) bool { return f.fs != nil && f.fs.Changed(name) }

// Sessions resolves the flags over cfg into the sessions' model: nil (and
// no error) when no provider is chosen, so that sessions keep answering
// llm_query with "no LLM configured". Model flags without a provider are
// a usage error rather than silently ignored.
func (f *SessionFlags) Sessions(cfg config.Config) (*engine.SessionLLM, error) {
	m, err := Resolve(cfg, Choice{Provider: f.Provider, Model: f.Model, SubcallModel: f.Model, BaseURL: f.BaseURL})
	if err != nil {
		return nil, err
	}
	if !m.Chosen {
		for _, name := range []string{"model", "base-url", "max-cost", "max-tokens", "max-calls", "max-call-tokens", "allow-model"} {
			if f.changed(name) {
				return nil, fmt.Errorf("--%s needs a model provider for the sessions: add --provider (or set [run] provider in rlm.toml, or $RLM_PROVIDER)", name)
			}
		}
		return nil, nil
	}
	sc := cfg.Sessions
	b := engine.SessionBudget{MaxTokens: sc.MaxTokens, MaxCostUSD: sc.MaxCostUSD, MaxCalls: sc.MaxCalls, MaxCallTokens: sc.MaxCallTokens}
	if f.changed("max-tokens") {
		b.MaxTokens = f.MaxTokens
	}
	if f.changed("max-cost") {
		b.MaxCostUSD = f.MaxCost
	}
	if f.changed("max-calls") {
		b.MaxCalls = f.MaxCalls
	}
	if f.changed("max-call-tokens") {
		b.MaxCallTokens = f.MaxCallTokens
	}
	if b.MaxTokens < 0 || b.MaxCostUSD < 0 || b.MaxCalls < 0 || b.MaxCallTokens < 0 {
		return nil, fmt.Errorf("session budgets must not be negative")
	}
	allowed := append(slices.Clone(sc.AllowModels), f.AllowModels...)
	llm.SetPrices(cfg.Pricing)
	if err := CheckPriced(m.Provider, b.MaxCostUSD, append([]string{m.SubcallModel}, allowed...)...); err != nil {
		return nil, err
	}
	prov, err := llm.New(m.Provider, m.Options)
	if err != nil {
		if f.changed("provider") {
			return nil, err
		}
		// A provider chosen in rlm.toml or $RLM_PROVIDER (for `rlm run`,
		// perhaps) whose key is missing here must not stop code that never
		// calls llm_query: the calls fail, saying why.
		prov = unusable{name: m.Provider, err: err}
	}
	return &engine.SessionLLM{
		Provider: prov, ProviderName: m.Provider, Model: m.SubcallModel, Allowed: allowed,
		Budget: b, MaxConcurrent: cfg.Run.MaxConcurrent,
	}, nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// unusable is a provider that could not be built: each call fails with
// the reason.
type unusable struct {
	name string
	err  error
}

func (u unusable) Name() string { return u.name }

func (u unusable) Complete(context.Context, llm.Request) (llm.Response, error) {
	return llm.Response{}, fmt.Errorf("the %s provider configured in rlm.toml or $RLM_PROVIDER cannot be used: %w", u.name, u.err)
}
