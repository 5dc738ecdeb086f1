package runcmd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlmkit/rlm/cmd/rlm/cli/clitest"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm/llmtest"
	"github.com/rlmkit/rlm/internal/testutil"
)

// These tests run `rlm run` whole: the real CLI, the real python plugin
// over go-plugin, the real interpreter, and the real provider clients of
// core/llm talking to fake servers that speak the OpenAI and Anthropic wire
// formats.

var pluginDir string

func TestMain(m *testing.M) {
	testutil.BuildMain(m, &pluginDir, "../../../../plugins/python/cmd/rlm-plugin-python")
}

const apiKey = "sk-e2e-secret-key-4242"

// cli runs rlm with args in a clean environment.
func cli(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return clitest.Run(t, pluginDir, stdin, args...)
}

// model is the scripted model behind the fake servers. It tells the root
// loop, the child loop and llm_query apart by their messages, and keeps the
// token counts the servers report (words) to check the run's totals.
type model struct {
	mu      sync.Mutex
	in, out int64
	calls   int
	failure string
}

func (m *model) answer(req llmtest.ChatRequest) string {
	text := m.script(req)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	m.in += llmtest.Words(req.System)
	for _, msg := range req.Messages {
		m.in += llmtest.Words(msg.Content)
	}
	m.out += llmtest.Words(text)
	return text
}

func (m *model) fail(format string, args ...any) string {
	m.mu.Lock()
	if m.failure == "" {
		m.failure = fmt.Sprintf(format, args...)
	}
	m.mu.Unlock()
	return "FINAL(script failure)"
}

func (m *model) script(req llmtest.ChatRequest) string {
	first := req.Messages[0].Content
	last := req.LastUser()
	switch {
	case req.System == "":
		// llm_query from the root's code.
		if !strings.HasPrefix(first, "Is BLUEFOX a code word?") {
			return m.fail("unexpected llm_query %q", first)
		}
		return "yes"
	case strings.Contains(first, "sub-task at recursion depth 1"):
		switch req.Turn() {
		case 0:
			if !strings.Contains(first, "What colour") {
				return m.fail("child task: %q", first)
			}
			return "```repl\nimport re\ncolour = re.search(r'was (\\w+)', context).group(1)\nprint(colour)\n```"
		default:
			if !strings.Contains(last, "teal") {
				return m.fail("child output: %q", last)
			}
			return "FINAL_VAR(colour)"
		}
	}
	switch req.Turn() {
	case 0:
		return "Let me search.\n```repl\nhits = search_context(r'code is (\\w+)', window=30)\nprint(len(hits), hits[0]['match'])\n```"
	case 1:
		if !strings.Contains(last, "1 code is BLUEFOX") {
			return m.fail("root did not see its search: %q", last)
		}
		return "```repl\nword = hits[0]['match'].split()[-1]\nconfirm = llm_query('Is ' + word + ' a code word? yes/no')\nsub = rlm_query('What colour is mentioned?', 'The sky was teal today.')\nanswer = f'{word} ({confirm}, {sub})'\nprint(answer)\n```"
	default:
		if !strings.Contains(last, "BLUEFOX (yes, teal)") {
			return m.fail("root did not see the sub-calls: %q", last)
		}
		return "FINAL_VAR(answer)"
	}
}

func TestRunEndToEnd(t *testing.T) {
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			m := &model{}
			var srv *llmtest.Server
			modelName := "gpt-4o"
			if kind == "openai" {
				srv = llmtest.NewOpenAIServer(t, m.answer, llmtest.WithAPIKey(apiKey))
				t.Setenv("OPENAI_API_KEY", apiKey)
			} else {
				srv = llmtest.NewAnthropicServer(t, m.answer, llmtest.WithAPIKey(apiKey))
				t.Setenv("ANTHROPIC_API_KEY", apiKey)
				modelName = "claude-sonnet-4-5"
			}
			dir := t.TempDir()
			ctxFile := filepath.Join(dir, "context.txt")
			filler := strings.Repeat("nothing to see here. ", 2000)
			os.WriteFile(ctxFile, []byte(filler+"the secret code is BLUEFOX and more. "+filler), 0o644)
			trace := filepath.Join(dir, "trace.jsonl")

			stdout, stderr, code := cli(t, "", "run", "--task", "What is the secret code?", "--context", ctxFile,
				"--provider", kind, "--base-url", srv.BaseURL(), "--model", modelName,
				"--format", "json", "--trace", trace, "--max-depth", "1")
			if m.failure != "" {
				t.Fatalf("scripted model: %s", m.failure)
			}
			if code != 0 {
				t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
			}
			var out struct {
				Answer string       `json:"answer"`
				Source string       `json:"answer_source"`
				Usage  engine.Usage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatalf("%v: %s", err, stdout)
			}
			if out.Answer != "BLUEFOX (yes, teal)" || out.Source != "final_var" {
				t.Fatalf("answer %+v", out)
			}
			u := out.Usage
			// Sub-calls (the llm_query and the child loop) are in the totals.
			if u.InputTokens != m.in || u.OutputTokens != m.out || u.Calls != m.calls || m.calls != 6 {
				t.Fatalf("usage %+v; the server saw %d calls, %d in, %d out", u, m.calls, m.in, m.out)
			}
			if u.Iterations != 5 || u.Subcalls != 2 || u.MaxDepthReached != 1 || u.CostUSD <= 0 {
				t.Fatalf("usage %+v", u)
			}

			evs := readTrace(t, trace)
			n := map[string]int{}
			for _, ev := range evs {
				n[ev.Type]++
			}
			if n[engine.EventRunStart] != 1 || n[engine.EventRunEnd] != 1 || n[engine.EventLLMCall] != 6 ||
				n[engine.EventCode] != 3 || n[engine.EventFinal] != 2 {
				t.Fatalf("event counts %v", n)
			}
			var sawSearch, sawChild, sawLLMQuery bool
			for _, ev := range evs {
				switch {
				case ev.Type == engine.EventCode && ev.Node == 0 && strings.Contains(ev.Output, "1 code is BLUEFOX"):
					sawSearch = true
				case ev.Type == engine.EventSubcall && ev.Kind == "rlm_query" && ev.Child != nil && *ev.Child == 1 && ev.Depth == 0:
					sawChild = true
				case ev.Type == engine.EventLLMCall && ev.Caller == "llm_query" && ev.Response.Text == "yes" && ev.Request.Model == modelName:
					sawLLMQuery = true
				case ev.Type == engine.EventLLMCall && ev.Node == 1 && (ev.Depth != 1 || ev.Parent == nil || *ev.Parent != 0):
					t.Fatalf("child call without its place in the tree: %+v", ev)
				}
			}
			if !sawSearch || !sawChild || !sawLLMQuery {
				t.Fatalf("trace lacks events: search %v child %v llm_query %v", sawSearch, sawChild, sawLLMQuery)
			}
			raw, _ := os.ReadFile(trace)
			if bytes.Contains(raw, []byte(apiKey)) || strings.Contains(stderr, apiKey) {
				t.Fatal("the API key leaked into the trace or stderr")
			}

			// The trace is a transcript: the replay provider re-runs the
			// same trajectory offline, through the real REPL again.
			stdout, stderr, code = cli(t, "", "run", "--task", "What is the secret code?", "--context", ctxFile,
				"--provider", "replay", "--transcript", trace, "--model", modelName, "--max-depth", "1")
			if code != 0 || stdout != "BLUEFOX (yes, teal)\n" {
				t.Fatalf("replay: exit %d, stdout %q, stderr %s", code, stdout, stderr)
			}
		})
	}
}

func readTrace(t *testing.T, path string) []engine.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []engine.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ev engine.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestSandboxTimeoutInsideTheLoop(t *testing.T) {
	var mu sync.Mutex
	var failure string
	srv := llmtest.NewOpenAIServer(t, func(req llmtest.ChatRequest) string {
		switch req.Turn() {
		case 0:
			return "```repl\nx = 5\nimport time\ntime.sleep(30)\n```"
		case 1:
			if !strings.Contains(req.LastUser(), "ran out of time") {
				mu.Lock()
				failure = req.LastUser()
				mu.Unlock()
			}
			return "```repl\nprint(x * 2)\n```"
		default:
			return "FINAL(" + strings.TrimPrefix(req.LastUser()[:strings.Index(req.LastUser(), "\n(iteration")], "Output:\n") + ")"
		}
	}, llmtest.WithAPIKey(apiKey))
	t.Setenv("OPENAI_API_KEY", apiKey)
	t.Setenv("RLM_TIMEOUT", "1s")
	stdout, stderr, code := cli(t, "", "run", "--task", "t", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "gpt-4o")
	if failure != "" {
		t.Fatalf("the timeout was not reported to the model: %q", failure)
	}
	// The variable set before the sleep survived the interrupt.
	if code != 0 || stdout != "10\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
}

// TestForcedAnswerWithoutFinal: when the iterations run out and the model's
// forced reply has no FINAL, rlm prints the reply but says so on stderr and
// exits 3, so that a script does not take it for an answer.
func TestForcedAnswerWithoutFinal(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, func(req llmtest.ChatRequest) string {
		if strings.Contains(req.LastUser(), "no turns left") {
			return "I could not finish."
		}
		return "```repl\nprint(1)\n```"
	}, llmtest.WithAPIKey(apiKey))
	t.Setenv("OPENAI_API_KEY", apiKey)
	stdout, stderr, code := cli(t, "", "run", "--task", "t", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "gpt-4o", "--max-iterations", "1")
	if code != 3 || stdout != "I could not finish.\n" || !strings.Contains(stderr, "forced answer has no FINAL") {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
}

// TestCompletion: shell completion offers the providers and backends.
func TestCompletion(t *testing.T) {
	for flag, want := range map[string]string{"--provider": "openai", "-b": "pyodide"} {
		stdout, stderr, code := cli(t, "", "__complete", "run", flag, "")
		if code != 0 || !strings.Contains("\n"+stdout, "\n"+want+"\n") {
			t.Errorf("completing %s: exit %d, stdout %q, stderr %s", flag, code, stdout, stderr)
		}
	}
}

// TestForcedFinalVarOfAMissingVariable: a forced FINAL_VAR of a variable the
// REPL does not have is no answer: rlm does not print the variable's name as
// one, says why on stderr, marks no_final and exits 3.
func TestForcedFinalVarOfAMissingVariable(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, func(llmtest.ChatRequest) string { return "FINAL_VAR(nonexistent_var)" }, llmtest.WithAPIKey(apiKey))
	t.Setenv("OPENAI_API_KEY", apiKey)
	args := []string{"run", "--task", "t", "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "gpt-4o", "--max-iterations", "2"}
	stdout, stderr, code := cli(t, "", args...)
	if code != 3 || stdout == "nonexistent_var\n" || !strings.Contains(stderr, "no variable nonexistent_var") {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	stdout, stderr, code = cli(t, "", append(args, "--format", "json")...)
	var out struct {
		Answer     string `json:"answer"`
		Source     string `json:"answer_source"`
		NoFinal    bool   `json:"no_final"`
		MissingVar string `json:"missing_var"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != 3 || !out.NoFinal || out.MissingVar != "nonexistent_var" || out.Answer == "nonexistent_var" {
		t.Fatalf("exit %d, %+v (%v), stdout %s, stderr %s", code, out, err, stdout, stderr)
	}
}

// TestMaxCostWhenTheServerNamesItsModelItsOwnWay: an OpenAI-compatible
// server that answers as "m" for a requested gpt-4o-mini is priced as
// gpt-4o-mini, so --max-cost stops the run after the first call ($7.50 for
// 10M+10M tokens) with exit 3, rather than counting every call as free.
func TestMaxCostWhenTheServerNamesItsModelItsOwnWay(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, func(llmtest.ChatRequest) string { return "```repl\nprint(1)\n```" },
		llmtest.WithAPIKey(apiKey), llmtest.WithModel("m"), llmtest.WithUsage(10_000_000, 10_000_000))
	t.Setenv("OPENAI_API_KEY", apiKey)
	stdout, stderr, code := cli(t, "", "run", "--task", "t", "--provider", "openai", "--base-url", srv.BaseURL(),
		"--model", "gpt-4o-mini", "--max-cost", "0.5", "--max-iterations", "5", "--format", "json")
	var out struct {
		Usage engine.Usage `json:"usage"`
		Error string       `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != 3 {
		t.Fatalf("exit %d (%v), stdout %s, stderr %s", code, err, stdout, stderr)
	}
	if srv.Count() != 1 || out.Usage.CostUSD != 7.5 || !strings.Contains(out.Error, "cost budget exhausted") {
		t.Fatalf("%d calls, %+v, stderr %s", srv.Count(), out, stderr)
	}
}
