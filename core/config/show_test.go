package config

import (
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core/defaults"
)

// TestTOMLShowsEffectiveProviderDefaults: `config show` prints the timeout
// and retries a provider really gets, not the 0 that stands for them.
func TestTOMLShowsEffectiveProviderDefaults(t *testing.T) {
	c := Default()
	c.Providers["openai"] = Provider{}
	c.Providers["ollama"] = Provider{Timeout: Duration(defaults.LLMTimeout / 2), MaxRetries: 1}
	out, err := c.TOML()
	if err != nil {
		t.Fatal(err)
	}
	openai := out[strings.Index(out, "[providers.openai]"):]
	for _, want := range []string{`timeout = "` + defaults.LLMTimeout.String() + `"`, "max_retries = 4"} {
		if !strings.Contains(openai, want) {
			t.Errorf("[providers.openai] lacks %s:\n%s", want, openai)
		}
	}
	ollama := out[strings.Index(out, "[providers.ollama]"):strings.Index(out, "[providers.openai]")]
	if !strings.Contains(ollama, "max_retries = 1") || !strings.Contains(ollama, `timeout = "`+(defaults.LLMTimeout/2).String()+`"`) {
		t.Errorf("[providers.ollama] does not keep its own values:\n%s", ollama)
	}
}
