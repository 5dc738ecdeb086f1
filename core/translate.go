package core

// The translation between the wire's types (core/proto) and core's, in one
// place: what a plugin or the daemon sends becomes a Result here and
// nowhere else. The ending's translation is core/ending's.

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/rlmkit/rlm/core/ending"
	pb "github.com/rlmkit/rlm/core/proto"
)

// FromProto converts the wire result.
func FromProto(r *pb.Result) *Result {
	if r == nil {
		return &Result{EndedBy: ending.Crashed, ExitCode: -1, Error: "no result"}
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
		EndedBy:         ending.FromProto(r.GetEndedBy()),
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
	res.TimedOut = res.EndedBy == ending.Timeout
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
