// Package defaults is the one home of rlm's default limits, the values a
// run gets when neither a flag, the configuration nor the request sets
// one. The configuration's defaults, the HTTP server, the plugins and the
// engine all read them here, so that changing one changes every path.
package defaults

import "time"

const (
	// Timeout is the wall-clock limit of a program or a session cell.
	Timeout = 30 * time.Second
	// MaxOutputBytes is the output kept of each of stdout and stderr
	// (head and tail; the middle is counted as omitted).
	MaxOutputBytes = 1 << 20
	// BatchConcurrency is how many queries of one llm_query_batched or
	// rlm_query_batched call are in flight at once (rlm run also gives it
	// to the provider as its concurrency limit).
	BatchConcurrency = 16
	// LLMTimeout bounds each attempt of a model call (core/llm's
	// Options.Timeout).
	LLMTimeout = 10 * time.Minute
	// InstallTimeout bounds installing a program's requirements (python,
	// node) or compiling it (golang) when the request sets no limit of its
	// own: rlm exec's --install-timeout sets one; HTTP and MCP requests
	// cannot, so this is theirs.
	InstallTimeout = 5 * time.Minute
	// LLMMaxRetries is how many times a model call is retried after 408,
	// 429, 5xx and dropped connections (core/llm's Options.MaxRetries).
	LLMMaxRetries = 4
)
