// Package core is rlm's public API: run programs and REPL sessions in a
// runtime, whatever backend serves it (a native plugin, the WebAssembly
// plugin or the daemon), with one Result shape for every path.
package core

import (
	"encoding/base64"
	"strings"
	"time"
	"unicode/utf8"

	pb "github.com/rlmkit/rlm/core/proto"
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
	// EndedBy is lower case: exit, timeout, signal, memory_limit,
	// output_limit, process_limit, fuel, cancelled, crashed, install_failed,
	// disk_limit, cpu_limit.
	EndedBy         string `json:"ended_by"`
	StateLost       bool   `json:"state_lost,omitempty"`
	Files           []File `json:"files_produced,omitempty"`
	FilesOmitted    bool   `json:"files_omitted,omitempty"`
	FuelConsumed    int64  `json:"fuel_consumed,omitempty"`
	MemoryUsedBytes int64  `json:"memory_used_bytes,omitempty"`
	Backend         string `json:"backend,omitempty"`
	Isolation       string `json:"isolation,omitempty"`
	WorkspacePath   string `json:"workspace_path,omitempty"`
	InstallMs       int64  `json:"install_ms,omitempty"`
	InstallCached   bool   `json:"install_cached,omitempty"`
	// Value is the repr of a session cell's final expression, as a
	// notebook shows it (capped like output); nil when the cell ends in
	// another statement or a semicolon, the value is None, and for
	// programs.
	Value *string `json:"value,omitempty"`

	// Duration is DurationMs at full resolution (not in JSON).
	Duration time.Duration `json:"-"`
}

// File is a produced file. Data is not in the default JSON (see
// FilesWithData).
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Change string `json:"change,omitempty"`
	Data   []byte `json:"-"`
}

// Base64 is the file's content as standard base64.
func (f File) Base64() string { return base64.StdEncoding.EncodeToString(f.Data) }

// FromProto converts the wire result.
func FromProto(r *pb.Result) *Result {
	if r == nil {
		return &Result{EndedBy: "crashed", ExitCode: -1, Error: "no result"}
	}
	res := &Result{
		Stdout:          string(r.GetStdout()),
		Stderr:          string(r.GetStderr()),
		StdoutOmitted:   r.GetStdoutOmitted(),
		StderrOmitted:   r.GetStderrOmitted(),
		ExitCode:        int(r.GetExitCode()),
		Signal:          r.GetSignal(),
		Error:           r.GetError(),
		DurationMs:      r.GetDurationMs(),
		EndedBy:         EndedByName(r.GetEndedBy()),
		StateLost:       r.GetStateLost(),
		FilesOmitted:    r.GetFilesOmitted(),
		FuelConsumed:    r.GetFuelConsumed(),
		MemoryUsedBytes: r.GetMemoryUsedBytes(),
		Backend:         r.GetBackend(),
		Isolation:       r.GetIsolation(),
		WorkspacePath:   r.GetWorkspacePath(),
		InstallMs:       r.GetInstallMs(),
		InstallCached:   r.GetInstallCached(),
		Value:           r.Value,
		Duration:        time.Duration(r.GetDurationUs()) * time.Microsecond,
	}
	if res.Duration == 0 {
		res.Duration = time.Duration(res.DurationMs) * time.Millisecond
	}
	res.StdoutBase64, res.StderrBase64 = Base64IfBinary(r.GetStdout()), Base64IfBinary(r.GetStderr())
	res.TimedOut = r.GetEndedBy() == pb.EndedBy_TIMEOUT
	res.Truncated = res.StdoutOmitted > 0 || res.StderrOmitted > 0
	for _, f := range r.GetFiles() {
		res.Files = append(res.Files, File{Path: f.GetPath(), Size: f.GetSize(), Change: f.GetChange(), Data: f.GetData()})
	}
	return res
}

// Base64IfBinary is b in standard base64 when b is not valid UTF-8 (its
// JSON text form would replace bytes), else "".
func Base64IfBinary(b []byte) string {
	if utf8.Valid(b) {
		return ""
	}
	return base64.StdEncoding.EncodeToString(b)
}

// EndedByName is the lower-case name used in JSON.
func EndedByName(e pb.EndedBy) string {
	if e == pb.EndedBy_ENDED_BY_UNSPECIFIED {
		return "exit"
	}
	return strings.ToLower(e.String())
}
