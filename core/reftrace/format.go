// Package reftrace converts rlm's traces to and from the JSONL log of the
// reference RLM implementation (alexzhang13/rlm, its rlm/logger), so that
// the reference's visualizer and training pipelines read rlm's runs, and
// the reference's logs open in `rlm trace show` / `rlm trace view` and
// replay through the replay provider.
//
// # The reference's log
//
// One JSON object per line: a "metadata" line (the run's configuration:
// root_model, max_depth, max_iterations, backend, ...), then one
// "iteration" line per model turn of the root loop, each holding the whole
// prompt (messages, system first), the reply, and the code blocks it ran
// with their stdout, stderr, locals, time and the sub-calls they made
// ("rlm_calls"). A sub-call that started a child loop carries the child's
// whole trajectory in its "metadata" ({run_metadata, iterations}), so the
// log is a tree like rlm's trace.
//
// # What does not map
//
// rlm's trace has more than the reference's log: usage and latency per
// model call, the request's model and limits, each block's ending, node
// numbers, the answer's source, budget warnings. Export keeps them in an
// extra "rlm" key on the objects it writes (the
// reference's readers ignore keys they do not know), so that import gives
// back the same run. A log written by the reference has no "rlm" keys:
// import then takes what the log says and derives the rest (the root
// turns' usage is unknown and counted as 0; a block's stderr is its
// error). Depth is counted differently: the reference's max_depth=1 means
// no recursion, rlm's --max-depth 0 does, so max_depth is rlm's plus one.
package reftrace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

// Line types of the reference's log.
const (
	TypeMetadata  = "metadata"
	TypeIteration = "iteration"
)

// Metadata is the reference's RLMMetadata: the first line of a log (with
// Type and Timestamp) and a child trajectory's run_metadata (without).
type Metadata struct {
	Type              string         `json:"type,omitempty"`
	Timestamp         string         `json:"timestamp,omitempty"`
	RootModel         string         `json:"root_model"`
	MaxDepth          int            `json:"max_depth"`
	MaxIterations     int            `json:"max_iterations"`
	Backend           string         `json:"backend"`
	BackendKwargs     map[string]any `json:"backend_kwargs"`
	EnvironmentType   string         `json:"environment_type"`
	EnvironmentKwargs map[string]any `json:"environment_kwargs"`
	OtherBackends     []string       `json:"other_backends"`
	RLM               *RunExt        `json:"rlm,omitempty"`
}

// RunExt is what rlm keeps of a run that the reference's metadata lacks.
type RunExt struct {
	Task    string            `json:"task,omitempty"`
	Config  *engine.RunConfig `json:"config,omitempty"`
	Context *engine.CtxInfo   `json:"context,omitempty"`
	// The run's end (top-level metadata only).
	Answer string        `json:"answer,omitempty"`
	Source string        `json:"answer_source,omitempty"`
	Error  string        `json:"error,omitempty"`
	Totals *engine.Usage `json:"totals,omitempty"`
	End    *time.Time    `json:"end,omitempty"`
	// The loop a trajectory is (child trajectories).
	Node  int `json:"node,omitempty"`
	Depth int `json:"depth,omitempty"`
}

// Message is one message of a prompt.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// UnmarshalJSON accepts a content that is not a string (a list of parts,
// as some clients send) by keeping its JSON text.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role, m.Content = raw.Role, textOf(raw.Content)
	return nil
}

// Prompt is a turn's prompt: its messages.
type Prompt []Message

// UnmarshalJSON accepts the message list the reference's loop logs, and
// also a plain string or an object (its RLMIteration declares
// `prompt: str | dict`), each taken as one user message.
func (p *Prompt) UnmarshalJSON(b []byte) error {
	var msgs []Message
	if err := json.Unmarshal(b, &msgs); err == nil {
		*p = msgs
		return nil
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || (t[0] != '"' && t[0] != '{') {
		return fmt.Errorf("a prompt is a list of messages, a string or an object, not %.20s", t)
	}
	*p = Prompt{{Role: "user", Content: textOf(b)}}
	return nil
}

// Iteration is one model turn (the reference's RLMIteration as its logger
// writes it).
type Iteration struct {
	Type          string      `json:"type,omitempty"`
	Iteration     int         `json:"iteration"`
	Timestamp     string      `json:"timestamp"`
	Prompt        Prompt      `json:"prompt"`
	Response      string      `json:"response"`
	CodeBlocks    []CodeBlock `json:"code_blocks"`
	FinalAnswer   *Final      `json:"final_answer"`
	IterationTime *float64    `json:"iteration_time"`
	RLM           *IterExt    `json:"rlm,omitempty"`
}

// IterExt is what rlm keeps of a turn besides the reference's fields.
type IterExt struct {
	Iteration int           `json:"iteration"` // rlm's number: 0 for the forced answer
	Caller    string        `json:"caller"`    // root, child or forced
	Request   *llm.Request  `json:"request,omitempty"`
	Response  *llm.Response `json:"response,omitempty"` // without its text (in "response")
	LatencyMs float64       `json:"latency_ms,omitempty"`
	Error     string        `json:"error,omitempty"` // the model call failed
	Source    string        `json:"answer_source,omitempty"`
	// Warnings are the loop's warnings (budget, replay) from this turn on,
	// each with its place among the loop's events.
	Warnings []Warning `json:"warnings,omitempty"`
}

// Warning is a warning event and the number of the loop's other events
// before it.
type Warning struct {
	At    int          `json:"at"`
	Event engine.Event `json:"event"`
}

// CodeBlock is one block of code and what running it gave.
type CodeBlock struct {
	Code   string     `json:"code"`
	Result REPLResult `json:"result"`
}

// REPLResult is the reference's REPLResult as to_dict writes it.
type REPLResult struct {
	Stdout        string           `json:"stdout"`
	Stderr        string           `json:"stderr"`
	Locals        map[string]any   `json:"locals"`
	ExecutionTime float64          `json:"execution_time"`
	RLMCalls      []ChatCompletion `json:"rlm_calls"`
	FinalAnswer   *string          `json:"final_answer"`
	RLM           *BlockExt        `json:"rlm,omitempty"`
}

// BlockExt is what rlm keeps of a block.
type BlockExt struct {
	Block  int                `json:"block"`
	Result *engine.CodeResult `json:"result,omitempty"`
}

// ChatCompletion is one sub-call made from code (the reference's
// RLMChatCompletion): a plain model call, or a child loop whose
// trajectory is in Metadata. PromptTokens and CompletionTokens are what
// the reference's visualizer shows of it.
type ChatCompletion struct {
	RootModel        string       `json:"root_model"`
	Prompt           any          `json:"prompt"`
	Response         string       `json:"response"`
	UsageSummary     UsageSummary `json:"usage_summary"`
	ExecutionTime    float64      `json:"execution_time"`
	PromptTokens     int64        `json:"prompt_tokens"`
	CompletionTokens int64        `json:"completion_tokens"`
	Metadata         *Trajectory  `json:"metadata,omitempty"`
	Error            *string      `json:"error,omitempty"`
	RLM              *CallExt     `json:"rlm,omitempty"`
}

// CallExt is what rlm keeps of a sub-call.
type CallExt struct {
	Kind         string        `json:"kind"`   // llm_query or rlm_query
	Caller       string        `json:"caller"` // llm_query, rlm_fallback or child
	Task         string        `json:"task,omitempty"`
	ContextChars int           `json:"context_chars,omitempty"`
	Message      string        `json:"message,omitempty"`
	Request      *llm.Request  `json:"request,omitempty"`  // without its messages
	Response     *llm.Response `json:"response,omitempty"` // without its text
	LatencyMs    float64       `json:"latency_ms,omitempty"`
	Source       string        `json:"answer_source,omitempty"`
}

// Trajectory is a child loop's log: its run_metadata and iterations.
type Trajectory struct {
	RunMetadata Metadata    `json:"run_metadata"`
	Iterations  []Iteration `json:"iterations"`
}

// UsageSummary is the reference's UsageSummary.
type UsageSummary struct {
	ModelUsageSummaries map[string]ModelUsage `json:"model_usage_summaries"`
	TotalCost           *float64              `json:"total_cost,omitempty"`
}

// ModelUsage is the reference's ModelUsageSummary.
type ModelUsage struct {
	TotalCalls        int      `json:"total_calls"`
	TotalInputTokens  int64    `json:"total_input_tokens"`
	TotalOutputTokens int64    `json:"total_output_tokens"`
	TotalCost         *float64 `json:"total_cost,omitempty"`
}

// Final is an iteration's answer. Older reference logs wrote it as a pair
// [kind, answer]; the answer is the second element.
type Final string

// UnmarshalJSON accepts a string or a [kind, answer] pair.
func (f *Final) UnmarshalJSON(b []byte) error {
	var pair []string
	if json.Unmarshal(b, &pair) == nil && len(pair) == 2 {
		*f = Final(pair[1])
		return nil
	}
	*f = Final(textOf(b))
	return nil
}

// textOf is a JSON value as text: a string's content, anything else its
// JSON.
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// timeFormat is Python's datetime.isoformat() for an aware UTC time.
const timeFormat = "2006-01-02T15:04:05.000000-07:00"
