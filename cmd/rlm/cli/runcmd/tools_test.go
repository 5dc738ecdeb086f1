package runcmd_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlmkit/rlm/core/llm/llmtest"
)

// TestRunToolsOverHTTP runs `rlm run` with a Python tool file and an HTTP
// tool against a fake OpenAI server and a tool server on 127.0.0.1: the
// model is sent the Python tool's docstring and the HTTP tool's
// description, its code calls both, the tool server gets the arguments as
// a JSON POST, and an error status reaches the code as a ToolError.
func TestRunToolsOverHTTP(t *testing.T) {
	var (
		mu   sync.Mutex
		got  []map[string]any
		fail string
	)
	failf := func(format string, args ...any) string {
		mu.Lock()
		defer mu.Unlock()
		if fail == "" {
			fail = fmt.Sprintf(format, args...)
		}
		return "FINAL(script failure)"
	}
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var args map[string]any
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &args) != nil {
			http.Error(w, "want a JSON POST", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, args)
		mu.Unlock()
		if args["city"] == "Atlantis" {
			http.Error(w, "no such city", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"city": %q, "celsius": 21}`, args["city"])
	}))
	defer tools.Close()

	srv := llmtest.NewOpenAIServer(t, func(req llmtest.ChatRequest) string {
		for _, want := range []string{
			"- shout(text, times=2): Return text in capitals, times times.",
			"- weather(city): Today's weather in a city.",
		} {
			if !strings.Contains(req.System, want) {
				return failf("the system prompt lacks %q:\n%s", want, req.System)
			}
		}
		switch req.Turn() {
		case 0:
			return "```repl\nw = weather('Paris')\ntry:\n    weather(city='Atlantis')\nexcept ToolError as e:\n    print('ToolError:', e)\nanswer_text = shout(w['city'], 1) + ' ' + str(w['celsius'])\n```"
		case 1:
			if !strings.Contains(req.LastUser(), "ToolError: tool weather: POST "+tools.URL+" answered 404 Not Found: no such city") {
				return failf("the code did not see the tool's error: %q", req.LastUser())
			}
			return "FINAL_VAR(answer_text)"
		}
		return failf("unexpected turn %d", req.Turn())
	}, llmtest.WithAPIKey(apiKey))
	t.Setenv("OPENAI_API_KEY", apiKey)

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "shout.py"), []byte("def shout(text, times=2):\n    \"\"\"Return text in capitals, times times.\"\"\"\n    return ' '.join([text.upper()] * times)\n"), 0o644)
	task := filepath.Join(dir, "task.toml")
	os.WriteFile(task, []byte(fmt.Sprintf(`task = "What is the weather in Paris?"
tools = ["shout.py"]
[[tool]]
name = "weather"
description = "Today's weather in a city."
params = ["city"]
url = %q
timeout = "1m"
`, tools.URL)), 0o644)

	stdout, stderr, code := cli(t, "", "run", task, "--provider", "openai", "--base-url", srv.BaseURL(), "--model", "gpt-4o")
	if fail != "" {
		t.Fatalf("scripted model: %s", fail)
	}
	if code != 0 || strings.TrimSpace(stdout) != "PARIS 21" {
		t.Fatalf("exit %d, stdout %q, want PARIS 21\nstderr %s", code, stdout, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0]["city"] != "Paris" || got[1]["city"] != "Atlantis" || len(got[0]) != 1 {
		t.Fatalf("the tool server got %v, want {city: Paris} then {city: Atlantis}", got)
	}
}
