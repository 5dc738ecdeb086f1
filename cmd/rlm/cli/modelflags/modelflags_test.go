package modelflags

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/llm"
)

func parse(t *testing.T, args ...string) *SessionFlags {
	t.Helper()
	f := &SessionFlags{}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestResolvePrecedence(t *testing.T) {
	cfg := config.Default()
	m, err := Resolve(cfg, Choice{})
	if err != nil || m.Provider != "anthropic" || m.Model != "claude-sonnet-4-5" || m.Chosen {
		t.Fatalf("defaults: %+v %v", m, err)
	}
	cfg.Run.Provider, cfg.Run.Model, cfg.Run.SubcallModel = "openai", "m-file", "m-sub"
	cfg.Providers = map[string]config.Provider{"openai": {BaseURL: "http://file/v1"}}
	m, _ = Resolve(cfg, Choice{})
	if !m.Chosen || m.Model != "m-file" || m.SubcallModel != "m-sub" || m.Options.BaseURL != "http://file/v1" {
		t.Fatalf("config: %+v", m)
	}
	m, _ = Resolve(cfg, Choice{Provider: "ollama", Model: "m-flag", BaseURL: "http://flag"})
	if m.Provider != "ollama" || m.Model != "m-flag" || m.SubcallModel != "m-sub" || m.Options.BaseURL != "http://flag" {
		t.Fatalf("flags: %+v", m)
	}
	if _, err := Resolve(cfg, Choice{Provider: "gemini"}); err == nil || !strings.Contains(err.Error(), `unknown provider "gemini"`) {
		t.Fatalf("unknown provider: %v", err)
	}
}

func TestSessionsOnlyWithAChosenProvider(t *testing.T) {
	cfg := config.Default()
	if sl, err := parse(t).Sessions(cfg); sl != nil || err != nil {
		t.Fatalf("no provider: %+v %v", sl, err)
	}
	if _, err := parse(t, "--max-calls", "3").Sessions(cfg); err == nil || !strings.Contains(err.Error(), "--max-calls needs a model provider") {
		t.Fatalf("a budget without a provider: %v", err)
	}
	cfg.Sessions.MaxCalls, cfg.Sessions.AllowModels = 5, []string{"m-b"}
	sl, err := parse(t, "--provider", "ollama", "--model", "m-a", "--max-calls", "2", "--allow-model", "m-c").Sessions(cfg)
	if err != nil || sl.Model != "m-a" || sl.Budget.MaxCalls != 2 || strings.Join(sl.Allowed, ",") != "m-b,m-c" {
		t.Fatalf("flags over config: %+v %v", sl, err)
	}
	if _, err := parse(t, "--provider", "ollama", "--model", "m-unpriced", "--max-cost", "1").Sessions(cfg); err == nil || !strings.Contains(err.Error(), `--max-cost cannot be enforced: rlm knows no price for model "m-unpriced"`) {
		t.Fatalf("an unpriced cost cap: %v", err)
	}
}

// A provider chosen in rlm.toml whose key is missing here does not stop a
// session that never calls llm_query; a call says why it cannot be made.
// The same on the command line is an error at once.
func TestMissingKeyFailsTheCallNotTheCommand(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	cfg := config.Default()
	cfg.Run.Provider = "openai"
	sl, err := parse(t).Sessions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	br, _ := sl.Bridges("")
	if _, err := br.LLMQuery(context.Background(), "hi", ""); err == nil || !strings.Contains(err.Error(), "the openai provider configured in rlm.toml or $RLM_PROVIDER cannot be used") {
		t.Fatalf("call: %v", err)
	}
	if _, err := parse(t, "--provider", "openai").Sessions(config.Default()); err == nil {
		t.Fatal("--provider openai without a key was accepted")
	} else if _, ok := err.(*llm.Error); !ok && !strings.Contains(err.Error(), "key") {
		t.Fatalf("--provider openai without a key: %v", err)
	}
}
