package sandboxfusion

import (
	"fmt"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/server"
)

// language is how one SandboxFusion language runs on rlm.
type language struct {
	// runtime is the rlm runtime (plugin) name that runs it.
	runtime string
	// compiled languages' compile_timeout is their compiler's own wall
	// clock (Limits.InstallTimeout), apart from run_timeout: rlm's plugins
	// compile and run in one Run, each step under its own limit.
	compiled bool
	// install says what the operator installs to enable it.
	install string
}

// languages maps SandboxFusion's language names onto rlm runtimes: the one
// table to extend when a plugin for another language is added. A language
// whose runtime is not enabled on the server is answered SandboxError
// naming what to install.
var languages = map[string]language{
	"python":     {runtime: "python", install: "python3 (enable with --mode python)"},
	"nodejs":     {runtime: "node", install: "node (enable with --mode node)"},
	"javascript": {runtime: "node", install: "node (enable with --mode node)"},
	"bash":       {runtime: "shell", install: "bash (enable with --mode shell)"},
	"go":         {runtime: "golang", compiled: true, install: "go (enable with --mode golang)"},
	"cpp":        {runtime: "cpp", compiled: true, install: "g++ and the rlm-cpp plugin (enable with --mode cpp)"},
	"c":          {runtime: "c", compiled: true, install: "gcc and the rlm-c plugin (enable with --mode c)"},
	"java":       {runtime: "java", compiled: true, install: "a JDK and the rlm-java plugin (enable with --mode java)"},
	"rust":       {runtime: "rust", compiled: true, install: "rustc and the rlm-rust plugin (enable with --mode rust)"},
}

// unsupported are languages SandboxFusion knows that rlm has no runtime
// for: a request naming one is answered SandboxError, not 422, since the
// request itself is well formed.
var unsupported = []string{"go_test", "php", "csharp", "typescript", "sql", "lua", "R", "perl", "D_ut", "ruby",
	"scala", "julia", "pytest", "junit", "kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket", "cuda"}

// compileFailed begins the error of a run that its runtime ended at the
// compiler (plugins/golang).
const compileFailed = "compilation failed"

// compileTimedOut begins the golang plugin's error for a compiler stopped
// by its wall clock (core.InstallTimedOut).
const compileTimedOut = "compilation timed out"

// defaultTimeout is SandboxFusion's compile_timeout and run_timeout default.
const defaultTimeout = 10.0

// toExecute translates a request for language lang into POST /execute's;
// a *validationError is the 422 answer.
func toExecute(req *Request, lang language) (*server.ExecuteRequest, *validationError) {
	if req.Code == nil {
		v := invalid("code", "field required")
		return nil, &v
	}
	run, ct := defaultTimeout, defaultTimeout
	for _, t := range []struct {
		name string
		v    *float64
		into *float64
	}{{"run_timeout", req.RunTimeout, &run}, {"compile_timeout", req.CompileTimeout, &ct}} {
		if t.v == nil {
			continue
		}
		if *t.v <= 0 {
			v := invalid(t.name, fmt.Sprintf("must be a positive number of seconds, got %v", *t.v))
			return nil, &v
		}
		*t.into = *t.v
	}
	if m := req.MemoryLimitMB; m != nil && *m != -1 && *m <= 0 {
		v := invalid("memory_limit_MB", fmt.Sprintf("must be -1 (the server's limit) or a positive number of MB, got %d", *m))
		return nil, &v
	}
	wall := run
	out := &server.ExecuteRequest{Code: req.Code, Language: lang.runtime, TimeoutSeconds: &wall}
	if req.Stdin != nil {
		out.Stdin = *req.Stdin
	}
	for name, content := range req.Files {
		if content == nil {
			continue
		}
		if out.Files == nil {
			out.Files = server.FileMap{}
		}
		out.Files[name] = *content
	}
	return out, nil
}

// memoryBytes is the request's memory limit in bytes, 0 for the server's.
func memoryBytes(req *Request) int64 {
	if req.MemoryLimitMB == nil || *req.MemoryLimitMB <= 0 {
		return 0
	}
	return *req.MemoryLimitMB << 20
}

// fromExecute translates an /execute answer into SandboxFusion's. rlm's
// endings map onto its three command statuses without new strings: the
// wall clock and the CPU budget are TimeLimitExceeded (return_code null,
// the output so far kept); every other limit, a signal or an exit is
// Finished with a non-zero return_code (a signal as its negative number);
// rlm's own failure is Error under a SandboxError. ended_by keeps rlm's
// precise reason.
//
// A compiled language's run that its runtime reports ended at the compiler
// ("compilation failed", the golang plugin's error) answers in
// compile_result, run_result null, as SandboxFusion does, so clients tell
// a compile error from a runtime error; otherwise compile_result is null.
func fromExecute(resp *server.ExecuteResponse, fetch []string, compiled bool) *Response {
	r := &resp.Result
	cmd := &CommandResult{
		Status:        CommandFinished,
		ExecutionTime: time.Duration(resp.DurationMs * int64(time.Millisecond)).Seconds(),
		Stdout:        r.Stdout,
		Stderr:        r.Stderr,
	}
	out := &Response{Status: StatusFailed, RunResult: cmd, Files: map[string]string{}, EndedBy: string(r.EndedBy),
		compiled: r.Compile != nil && !r.Compile.Cached}
	switch {
	case r.EndedBy == ending.Timeout || r.EndedBy == ending.CPULimit || r.TimedOut:
		cmd.Status = CommandTimeLimitExceeded
	case r.EndedBy == ending.Crashed || r.EndedBy == ending.Cancelled || r.EndedBy == ending.InstallFailed:
		cmd.Status = CommandError
		out.Status = StatusSandboxError
	default:
		code := r.ExitCode
		if r.Signal != "" {
			if n := signalNumber(r.Signal); n > 0 {
				code = -n
			}
		}
		if code == 0 && r.EndedBy != ending.Exit {
			// A limit ended it without a status of its own: rlm killed it.
			code = -9
		}
		cmd.ReturnCode = &code
		if code == 0 {
			out.Status = StatusSuccess
		}
	}
	switch {
	case r.Compile != nil:
		// A compiled-language plugin (plugins/compiled) reports its compile
		// step apart: compile_result always, and run_result null when the
		// compile failed and nothing ran.
		out.CompileResult = compileCommand(r.Compile)
		if out.CompileResult.Status != CommandFinished || *out.CompileResult.ReturnCode != 0 {
			out.RunResult = nil
		}
	case compiled && strings.HasPrefix(r.Error, compileFailed) && cmd.ReturnCode != nil:
		out.CompileResult, out.RunResult = cmd, nil
	case compiled && strings.HasPrefix(r.Error, compileTimedOut) && cmd.Status == CommandTimeLimitExceeded:
		out.CompileResult, out.RunResult = cmd, nil
	}
	if out.Status != StatusSuccess {
		out.Message = resp.Error
		if out.CompileResult != nil && out.CompileResult.Status == CommandTimeLimitExceeded {
			// The plugins' own words name rlm exec's flag.
			out.Message = "the compiler ran past compile_timeout; raise it, or compile less"
		}
		if out.Message == "" {
			out.Message = describe(r.EndedBy, cmd.ReturnCode)
		}
	}
	for _, name := range fetch {
		key := strings.TrimPrefix(strings.TrimPrefix(name, "./"), "/")
		if b, ok := resp.FilesProduced[key]; ok {
			out.Files[name] = b
		}
	}
	return out
}

// describe says in words how a run that failed ended, when rlm's result
// carries no error of its own (a plain non-zero exit).
func describe(how ending.Reason, code *int) string {
	if how == ending.Exit && code != nil {
		return fmt.Sprintf("the program exited with status %d", *code)
	}
	return "the program ended by " + strings.ReplaceAll(string(how), "_", " ")
}

// sandboxError is the answer when rlm could not run the program at all.
func sandboxError(msg string) *Response {
	return &Response{Status: StatusSandboxError, Message: msg, Files: map[string]string{}}
}

// compileCommand is a compile step as SandboxFusion's compile_result: a
// compiler stopped by its time limit is TimeLimitExceeded (return_code
// null), any other ending Finished with the compiler's status.
func compileCommand(c *core.CompileResult) *CommandResult {
	cmd := &CommandResult{
		Status:        CommandFinished,
		ExecutionTime: time.Duration(c.DurationMs * int64(time.Millisecond)).Seconds(),
		Stdout:        c.Stdout,
		Stderr:        c.Stderr,
	}
	if c.EndedBy == ending.Timeout || c.EndedBy == ending.CPULimit {
		cmd.Status = CommandTimeLimitExceeded
		return cmd
	}
	code := c.ExitCode
	if code == 0 && c.EndedBy != ending.Exit && c.EndedBy != "" {
		code = -9
	}
	cmd.ReturnCode = &code
	return cmd
}
