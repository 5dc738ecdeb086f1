package llm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeClaude is a stand-in for the claude CLI: it records its arguments,
// working directory and stdin, then prints what `claude -p --output-format
// json` prints, or fails as FAKE_CLAUDE_MODE says.
const fakeClaude = `#!/bin/sh
log="$FAKE_CLAUDE_LOG"
: > "$log/args"
for a in "$@"; do printf '%s\n' "[$a]" >> "$log/args"; done
pwd > "$log/cwd"
cat > "$log/stdin"
case "$FAKE_CLAUDE_MODE" in
ok)
  cat <<'EOF'
{"type":"result","subtype":"success","is_error":false,"duration_ms":2846,"duration_api_ms":4562,"num_turns":1,"result":"Hello from claude","session_id":"9a5b8f3e-1c2d-4e5f-8a9b-0c1d2e3f4a5b","total_cost_usd":0.0292175,"usage":{"input_tokens":4,"cache_creation_input_tokens":5221,"cache_read_input_tokens":13010,"output_tokens":12,"server_tool_use":{"web_search_requests":0},"service_tier":"standard"},"modelUsage":{"claude-sonnet-4-5-20250929":{"inputTokens":4,"outputTokens":12,"cacheReadInputTokens":13010,"cacheCreationInputTokens":5221,"webSearchRequests":0,"costUSD":0.0292175,"contextWindow":200000}},"permission_denials":[],"uuid":"5c6d7e8f-0a1b-2c3d-4e5f-6a7b8c9d0e1f"}
EOF
  ;;
verbose)
  echo '[{"type":"system","subtype":"init"},{"type":"assistant","message":{}},{"type":"result","subtype":"success","is_error":false,"result":"from verbose","total_cost_usd":0.001,"usage":{"input_tokens":1,"output_tokens":2}}]'
  ;;
is_error)
  echo '{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 Overloaded","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}'
  exit 1
  ;;
crash)
  echo "Error: Invalid API key · Please run /login" >&2
  exit 1
  ;;
garbage)
  echo "not json at all"
  ;;
slow)
  sleep 5
  ;;
esac
`

func installFakeClaude(t *testing.T, mode string) (logDir string) {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(fakeClaude), 0o755); err != nil {
		t.Fatal(err)
	}
	logDir = t.TempDir()
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_CLAUDE_LOG", logDir)
	t.Setenv("FAKE_CLAUDE_MODE", mode)
	return logDir
}

func readLog(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestClaudeCode(t *testing.T) {
	logDir := installFakeClaude(t, "ok")
	p, err := New("claude-code", Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Complete(context.Background(), Request{
		Model: "sonnet", System: "You are an RLM.",
		Messages: []Message{{Role: "user", Content: "what is 2+2?"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello from claude" || resp.CostUSD != 0.0292175 || resp.Model != "claude-sonnet-4-5-20250929" {
		t.Errorf("resp = %+v", resp)
	}
	if resp.Usage != (Usage{InputTokens: 4 + 5221 + 13010, OutputTokens: 12}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	args := readLog(t, logDir, "args")
	want := "[-p]\n[--output-format]\n[json]\n[--tools]\n[]\n[--model]\n[sonnet]\n[--system-prompt]\n[You are an RLM.]\n"
	if args != want {
		t.Errorf("args:\n%s\nwant:\n%s", args, want)
	}
	if got := readLog(t, logDir, "stdin"); got != "what is 2+2?" {
		t.Errorf("stdin = %q", got)
	}
	// It ran in a scratch directory, not ours (no CLAUDE.md pick-up), and
	// cleaned it up.
	cwd := strings.TrimSpace(readLog(t, logDir, "cwd"))
	if wd, _ := os.Getwd(); cwd == wd || !strings.Contains(cwd, "rlm-claude-") {
		t.Errorf("cwd = %s", cwd)
	}
	if _, err := os.Stat(cwd); !os.IsNotExist(err) {
		t.Errorf("scratch dir left behind: %v", err)
	}
}

func TestClaudeCodeConversationIsFlattened(t *testing.T) {
	logDir := installFakeClaude(t, "ok")
	p, err := New("claude-code", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Complete(context.Background(), Request{Messages: []Message{
		{Role: "user", Content: "task"}, {Role: "assistant", Content: "```python\nprint(1)\n```"}, {Role: "user", Content: "output: 1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	in := readLog(t, logDir, "stdin")
	for _, want := range []string{"<user>\ntask\n</user>", "<assistant>\n```python\nprint(1)\n```\n</assistant>", "<user>\noutput: 1\n</user>"} {
		if !strings.Contains(in, want) {
			t.Errorf("stdin lacks %q:\n%s", want, in)
		}
	}
	if strings.Contains(readLog(t, logDir, "args"), "--model") {
		t.Errorf("--model passed without a model")
	}
}

func TestClaudeCodeVerboseArray(t *testing.T) {
	installFakeClaude(t, "verbose")
	p, _ := New("claude-code", Options{})
	resp, err := p.Complete(context.Background(), userReq("", "hi"))
	if err != nil || resp.Text != "from verbose" || resp.Usage != (Usage{1, 2}) {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestClaudeCodeErrors(t *testing.T) {
	for mode, want := range map[string]string{
		"is_error": "claude reported an error: API Error: 529 Overloaded",
		"crash":    "Invalid API key",
		"garbage":  "unparsable output",
	} {
		t.Run(mode, func(t *testing.T) {
			installFakeClaude(t, mode)
			p, err := New("claude-code", Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(context.Background(), userReq("", "hi"))
			if !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want %q", err, want)
			}
		})
	}
}

func TestClaudeCodeTimeout(t *testing.T) {
	installFakeClaude(t, "slow")
	p, _ := New("claude-code", Options{Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := p.Complete(context.Background(), userReq("", "hi"))
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 4*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

func TestClaudeCodeMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New("claude-code", Options{})
	if !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), "claude not found in PATH") {
		t.Fatalf("err = %v", err)
	}
	_, err = New("claude-code", Options{Command: "/nonexistent/claude"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/claude not found") {
		t.Fatalf("err = %v", err)
	}
}
