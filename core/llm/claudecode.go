package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// claudeCodeBackend runs the Claude Code CLI in print mode:
//
//	claude -p --output-format json --tools "" [--model M] [--system-prompt S]
//
// with the prompt on stdin (no argv length limit, nothing in `ps`). Each call
// runs in a fresh empty directory with every built-in tool disabled, so the
// CLI neither reads a project's CLAUDE.md nor edits files: it is used as a
// plain model. The CLI authenticates itself (its login or
// ANTHROPIC_API_KEY); this package passes no key.
type claudeCodeBackend struct {
	path string
}

func newClaudeCode(o Options) (completer, error) {
	cmd := o.Command
	if cmd == "" {
		cmd = "claude"
	}
	path, err := exec.LookPath(cmd)
	if err != nil {
		return nil, &Error{Provider: "claude-code", Kind: ErrProvider, Err: err,
			Msg: fmt.Sprintf("%s not found in PATH: install Claude Code (npm install -g @anthropic-ai/claude-code) or set [providers.claude-code] command", cmd)}
	}
	return &claudeCodeBackend{path: path}, nil
}

func (b *claudeCodeBackend) endpoint() string { return b.path }

// claudeResult is the object `claude -p --output-format json` prints.
type claudeResult struct {
	Type         string  `json:"type"`
	Subtype      string  `json:"subtype"`
	IsError      bool    `json:"is_error"`
	Result       string  `json:"result"`
	TotalCostUSD float64 `json:"total_cost_usd"`
	Usage        struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	} `json:"usage"`
	ModelUsage map[string]json.RawMessage `json:"modelUsage"`
}

func (b *claudeCodeBackend) complete(ctx context.Context, req Request) (Response, error) {
	dir, err := os.MkdirTemp("", "rlm-claude-")
	if err != nil {
		return Response{}, err
	}
	defer os.RemoveAll(dir)

	args := []string{"-p", "--output-format", "json", "--tools", ""}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	if req.System != "" {
		args = append(args, "--system-prompt", req.System)
	}
	cmd := exec.CommandContext(ctx, b.path, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(flattenPrompt(req.Messages))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	killGroupOnCancel(cmd)
	cmd.WaitDelay = 2 * time.Second
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return Response{}, ctx.Err()
	}

	res, perr := parseClaudeOutput(stdout.Bytes())
	switch {
	case perr == nil && res.IsError:
		msg := res.Result
		if msg == "" {
			msg = res.Subtype
		}
		return Response{}, &Error{Kind: ErrProvider, Msg: "claude reported an error: " + excerpt(msg)}
	case perr == nil && runErr == nil:
	case runErr != nil:
		return Response{}, &Error{Kind: ErrProvider, Err: runErr,
			Msg: fmt.Sprintf("%s failed (%v): %s", b.path, runErr, excerpt(stderr.String()+" "+stdout.String()))}
	default:
		return Response{}, &Error{Kind: ErrProvider, Err: perr,
			Msg: fmt.Sprintf("unparsable output from %s: %v: %s", b.path, perr, excerpt(stdout.String()))}
	}
	model := req.Model
	if len(res.ModelUsage) > 0 {
		names := make([]string, 0, len(res.ModelUsage))
		for n := range res.ModelUsage {
			names = append(names, n)
		}
		sort.Strings(names)
		model = names[0]
	}
	return Response{
		Text:  res.Result,
		Model: model,
		Usage: Usage{
			InputTokens:  res.Usage.InputTokens + res.Usage.CacheCreationInputTokens + res.Usage.CacheReadInputTokens,
			OutputTokens: res.Usage.OutputTokens,
		},
		CostUSD: res.TotalCostUSD,
	}, nil
}

// parseClaudeOutput accepts the single result object, or (with --verbose)
// an array of events whose last "result" element is the answer.
func parseClaudeOutput(out []byte) (claudeResult, error) {
	out = bytes.TrimSpace(out)
	var res claudeResult
	if len(out) == 0 {
		return res, errors.New("no output")
	}
	if out[0] == '[' {
		var events []claudeResult
		if err := json.Unmarshal(out, &events); err != nil {
			return res, err
		}
		for i := len(events) - 1; i >= 0; i-- {
			if events[i].Type == "result" {
				return events[i], nil
			}
		}
		return res, errors.New("no result event")
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return res, err
	}
	if res.Type != "" && res.Type != "result" {
		return res, fmt.Errorf("unexpected output type %q", res.Type)
	}
	return res, nil
}

// flattenPrompt turns a conversation into the single prompt print mode
// takes. One user message is passed as is; a longer conversation is written
// out turn by turn, ending with the last user turn.
func flattenPrompt(msgs []Message) string {
	if len(msgs) == 1 {
		return msgs[0].Content
	}
	var b strings.Builder
	b.WriteString("The conversation so far follows; reply as the assistant to the last user turn.\n\n")
	for _, m := range msgs {
		role := "User"
		if m.Role == "assistant" {
			role = "Assistant"
		}
		fmt.Fprintf(&b, "<%s>\n%s\n</%s>\n\n", strings.ToLower(role), m.Content, strings.ToLower(role))
	}
	return b.String()
}
