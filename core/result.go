package core

import (
	"encoding/base64"
	"io/fs"
	"time"
	"unicode/utf8"

	"github.com/rlmkit/rlm/core/ending"
)

// Result is how a program or a cell ended. Its JSON form is what
// `rlm exec --json` prints and what the HTTP server builds on.
type Result struct {
	// Stdout and Stderr are the bytes the program wrote. JSON text must be
	// UTF-8, so encoding/json shows invalid bytes as U+FFFD; when that
	// happens StdoutBase64 / StderrBase64 carry the exact bytes.
	Stdout        string `json:"stdout"`
	Stderr        string `json:"stderr"`
	StdoutBase64  string `json:"stdout_base64,omitempty"`
	StderrBase64  string `json:"stderr_base64,omitempty"`
	StdoutOmitted int64  `json:"stdout_omitted,omitempty"`
	StderrOmitted int64  `json:"stderr_omitted,omitempty"`
	ExitCode      int    `json:"exit_code"`
	Signal        string `json:"signal,omitempty"`
	Error         string `json:"error,omitempty"`
	DurationMs    int64  `json:"duration_ms"`
	TimedOut      bool   `json:"timed_out"`
	Truncated     bool   `json:"truncated"`
	// EndedBy is how it ended, lower case in JSON (see core/ending).
	EndedBy         ending.Reason `json:"ended_by"`
	StateLost       bool          `json:"state_lost,omitempty"`
	Files           []File        `json:"files_produced,omitempty"`
	FilesOmitted    bool          `json:"files_omitted,omitempty"`
	FuelConsumed    int64         `json:"fuel_consumed,omitempty"`
	MemoryUsedBytes int64         `json:"memory_used_bytes,omitempty"`
	Backend         string        `json:"backend,omitempty"`
	Isolation       string        `json:"isolation,omitempty"`
	WorkspacePath   string        `json:"workspace_path,omitempty"`
	InstallMs       int64         `json:"install_ms,omitempty"`
	InstallCached   bool          `json:"install_cached,omitempty"`
	// Value is the repr of a session cell's final expression, as a
	// notebook shows it (capped like output); nil when the cell ends in
	// another statement or a semicolon, the value is None, and for
	// programs.
	Value *string `json:"value,omitempty"`
	// Compile is the compile step of a compiled language's program (c,
	// cpp, java, rust), reported apart from the run so a judge can tell a
	// compile error or compile timeout from a runtime one; nil for
	// interpreters. When it failed the program did not run and the
	// Result repeats its ending, exit code and stderr.
	Compile *CompileResult `json:"compile,omitempty"`

	// Duration is DurationMs at full resolution (not in JSON).
	Duration time.Duration `json:"-"`
}

// CompileResult is how a compile step ended: the part of a Result a
// compiler's run has. It is its own type, not a Result, because a Result
// holding a Result is a cycle JSON Schema (the MCP tools' output schemas)
// cannot describe.
type CompileResult struct {
	Stdout          string        `json:"stdout"`
	Stderr          string        `json:"stderr"`
	ExitCode        int           `json:"exit_code"`
	Signal          string        `json:"signal,omitempty"`
	Error           string        `json:"error,omitempty"`
	DurationMs      int64         `json:"duration_ms"`
	EndedBy         ending.Reason `json:"ended_by"`
	MemoryUsedBytes int64         `json:"memory_used_bytes,omitempty"`
	// Cached marks a compile served from the compile cache: no compiler
	// ran for this request.
	Cached bool `json:"cached,omitempty"`
	// Duration is DurationMs at full resolution (not in JSON).
	Duration time.Duration `json:"-"`
}

// CompileOf is the compile step as the compiler's run r reports it.
func CompileOf(r *Result) *CompileResult {
	ms := r.DurationMs
	if ms == 0 {
		ms = r.Duration.Milliseconds()
	}
	return &CompileResult{
		Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode, Signal: r.Signal, Error: r.Error,
		DurationMs: ms, EndedBy: r.EndedBy, MemoryUsedBytes: r.MemoryUsedBytes, Duration: r.Duration,
	}
}

// Failed is the result of a program whose compile step c failed: it never
// ran, so the result is the compiler's (its stderr, status and ending,
// which rlm exec shows and exits with), and Compile is c.
func (c *CompileResult) Failed() *Result {
	return &Result{
		Stdout: c.Stdout, Stderr: c.Stderr, ExitCode: c.ExitCode, Signal: c.Signal, Error: c.Error,
		DurationMs: c.DurationMs, Duration: c.Duration, EndedBy: c.EndedBy, TimedOut: c.EndedBy == ending.Timeout,
		MemoryUsedBytes: c.MemoryUsedBytes, Compile: c,
	}
}

// File is a file given to a program or cell, or one it produced. Data is
// not in the default JSON (see FilesWithData).
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Change string `json:"change,omitempty"` // created | modified (produced files only)
	Data   []byte `json:"-"`
	// Mode is a given file's permission bits; 0 means 0644.
	Mode fs.FileMode `json:"-"`
}

// Base64 is the file's content as standard base64.
func (f File) Base64() string { return base64.StdEncoding.EncodeToString(f.Data) }

// Base64IfBinary is b in standard base64 when b is not valid UTF-8 (its
// JSON text form would replace bytes), else "".
func Base64IfBinary(b []byte) string {
	if utf8.Valid(b) {
		return ""
	}
	return base64.StdEncoding.EncodeToString(b)
}
