package runcmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTaskFileUnknownKeyNamesKeyAndFile(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "task.toml", "task = \"x\"\ncontext_fiel = \"a.txt\"\n[budget]\nmax_iter = 3\n")
	_, err := LoadTaskFile(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "context_fiel") || !strings.Contains(err.Error(), "budget.max_iter") {
		t.Fatalf("err = %v", err)
	}
}

func TestTaskFileOneContextSource(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "task.toml", "task = \"x\"\ncontext = \"a\"\ncontext_file = \"a.txt\"\n")
	if _, err := LoadTaskFile(p); err == nil || !strings.Contains(err.Error(), "at most one") {
		t.Fatalf("err = %v", err)
	}
}

func TestTaskFileContextSources(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.txt", "alpha")
	os.Mkdir(filepath.Join(dir, "docs"), 0o755)
	writeFile(t, dir, "docs/1.md", "one")
	writeFile(t, dir, "docs/2.md", "two")

	tf, err := LoadTaskFile(writeFile(t, dir, "f.toml", "task = \"x\"\ncontext_file = \"a.txt\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := tf.LoadContext()
	if err != nil || string(c.Data) != "alpha" || c.Kind != "text" {
		t.Fatalf("%+v %v", c, err)
	}
	tf, _ = LoadTaskFile(writeFile(t, dir, "g.toml", "task = \"x\"\ncontext_glob = \"docs/*.md\"\n"))
	c, err = tf.LoadContext()
	if err != nil || c.Kind != "json" || !strings.Contains(string(c.Data), `{"docs/1.md":"one"`) || !strings.Contains(string(c.Data), `"docs/2.md":"two"}`) {
		t.Fatalf("%s %v", c.Data, err)
	}
	tf, _ = LoadTaskFile(writeFile(t, dir, "n.toml", "task = \"x\"\ncontext_glob = \"nothing/*\"\n"))
	if _, err := tf.LoadContext(); err == nil || !strings.Contains(err.Error(), "matches no files") {
		t.Fatalf("err = %v", err)
	}
	tf, _ = LoadTaskFile(writeFile(t, dir, "m.toml", "task = \"x\"\ncontext_file = \"missing.txt\"\n"))
	if _, err := tf.LoadContext(); err == nil || !strings.Contains(err.Error(), "m.toml: context_file") {
		t.Fatalf("err = %v", err)
	}
}

// parse runs the command's flag parsing and returns the options.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	ios, _, _ := cmdutil.TestIO("from stdin")
	return cmdutil.ParseFlags(&cmdutil.Factory{IO: ios}, NewCmd, args...)
}

func TestFlagsOverrideTaskFileOverrideConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "ctx.txt", "file context")
	p := writeFile(t, dir, "task.toml", `task = "file task"
context_file = "ctx.txt"
provider = "openai"
model = "gpt-4o-mini"
transcript = "t.jsonl"
[budget]
max_iterations = 7
max_cost_usd = 0.5
max_time = "2m"
`)
	cfg := config.Default()
	cfg.Run.MaxDepth = 3
	cfg.Providers = map[string]config.Provider{"openai": {BaseURL: "http://cfg/v1", APIKey: "k"}}

	o, err := parse(t, p, "--max-iterations", "4", "--max-tokens", "1000")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := o.resolve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := engine.Budget{MaxIterations: 4, MaxDepth: 3, MaxTokens: 1000, MaxCostUSD: 0.5, MaxTime: 2 * time.Minute, MaxErrors: 5}
	if pl.budget != want {
		t.Fatalf("budget %+v, want %+v", pl.budget, want)
	}
	if pl.task != "file task" || string(pl.ctx.Data) != "file context" || pl.provider != "openai" || pl.model != "gpt-4o-mini" || pl.subcallModel != "gpt-4o-mini" {
		t.Fatalf("plan %+v", pl)
	}
	if pl.llmOpts.BaseURL != "http://cfg/v1" || pl.llmOpts.APIKey != "k" || pl.llmOpts.Transcript != filepath.Join(dir, "t.jsonl") || pl.llmOpts.MaxConcurrent != 16 {
		t.Fatalf("llm options %+v", pl.llmOpts)
	}

	o, _ = parse(t, p, "--task", "flag task", "--context", "-", "--provider", "anthropic", "--subcall-model", "claude-haiku-4-5", "--base-url", "http://flag", "--max-depth", "0")
	pl, err = o.resolve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if pl.task != "flag task" || string(pl.ctx.Data) != "from stdin" || pl.provider != "anthropic" ||
		pl.model != "gpt-4o-mini" || pl.subcallModel != "claude-haiku-4-5" || pl.llmOpts.BaseURL != "http://flag" || pl.budget.MaxDepth != 0 {
		t.Fatalf("plan %+v", pl)
	}
}

func TestProviderDefaultModel(t *testing.T) {
	o, _ := parse(t, "--task", "x")
	pl, err := o.resolve(config.Default())
	if err != nil || pl.provider != "anthropic" || pl.model != "claude-sonnet-4-5" || pl.ctx != nil {
		t.Fatalf("%+v %v", pl, err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "give a TASKFILE or --task"},
		{[]string{"--task", "x", "--format", "yaml"}, "--format"},
		{[]string{"--task", "x", "-q", "-v"}, "exclude"},
	} {
		_, err := parse(t, c.args...)
		var ee *cmdutil.ExitError
		if !errors.As(err, &ee) || ee.Code != cmdutil.ExitUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v", c.args, err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--task", "x", "--provider", "nope"}, `unknown provider "nope"`},
		{[]string{"--task", "x", "--provider", "replay"}, "needs a transcript"},
		{[]string{"--task", "x", "--max-iterations", "0"}, "max-iterations must be at least 1"},
		{[]string{"--task", "x", "--max-cost", "-1"}, "must not be negative"},
		{[]string{"--task", "x", "--context", "/nonexistent/file"}, "cannot read --context"},
		{[]string{"--task", "x", "--backend", "warp"}, "unknown backend"},
		{[]string{"/nonexistent/task.toml"}, "no such file"},
	} {
		o, err := parse(t, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.resolve(config.Default()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v", c.args, err)
		}
	}
}

func TestExitCodes(t *testing.T) {
	ctx := context.Background()
	cases := map[int]error{
		ExitBudget:          &engine.BudgetError{Kind: "cost"},
		ExitProvider:        errors.Join(engine.ErrProvider, llm.ErrServer),
		ExitSandbox:         errors.Join(engine.ErrSandbox),
		ExitInterrupted:     context.Canceled,
		cmdutil.ExitFailure: errors.New("other"),
	}
	for want, err := range cases {
		if got := exitCode(ctx, err); got != want {
			t.Errorf("%v: exit %d, want %d", err, got, want)
		}
	}
}

// TestMaxCostNeedsAPrice: --max-cost with a model rlm cannot price is an
// error that says how to give the price; a priced model, a price from the
// config and a provider that reports its own cost are fine.
func TestMaxCostNeedsAPrice(t *testing.T) {
	check := func(args ...string) error {
		t.Helper()
		o, err := parse(t, append([]string{"--task", "x"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		p, err := o.resolve(config.Default())
		if err != nil {
			t.Fatal(err)
		}
		return checkPriced(p)
	}
	if err := check("--provider", "openai", "--model", "unpriced-model-rlm17", "--max-cost", "1"); err == nil || !strings.Contains(err.Error(), `no price for model "unpriced-model-rlm17"`) || !strings.Contains(err.Error(), "[pricing.") {
		t.Errorf("unpriced model with --max-cost: err = %v", err)
	}
	if err := check("--provider", "openai", "--model", "gpt-4o", "--subcall-model", "unpriced-sub-rlm17", "--max-cost", "1"); err == nil || !strings.Contains(err.Error(), "unpriced-sub-rlm17") {
		t.Errorf("unpriced subcall model with --max-cost: err = %v", err)
	}
	if err := check("--provider", "openai", "--model", "unpriced-model-rlm17"); err != nil {
		t.Errorf("no --max-cost: %v", err)
	}
	if err := check("--provider", "openai", "--model", "gpt-4o", "--max-cost", "1"); err != nil {
		t.Errorf("priced model: %v", err)
	}
	llm.SetPrices(map[string]llm.Price{"priced-by-config-rlm17": {InputPerMTok: 1, OutputPerMTok: 2}})
	if err := check("--provider", "openai", "--model", "priced-by-config-rlm17", "--max-cost", "1"); err != nil {
		t.Errorf("model priced in the config: %v", err)
	}
}
