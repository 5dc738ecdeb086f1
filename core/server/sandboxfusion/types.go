// Package sandboxfusion is SandboxFusion's wire (POST /run_code, GET
// /v1/ping) in front of rlm's one execution core: the request is
// translated into a server.ExecuteRequest, run by server.ExecuteWaiting
// (the slots, limits, runtimes and metrics of POST /execute), and the
// result translated back. Clients written for SandboxFusion — verl's
// sandbox_fusion reward, SkyRL, tinker-cookbook — work against `rlm serve`
// unchanged: point them at http://HOST:8080/run_code.
package sandboxfusion

// Run statuses (the response's status).
const (
	StatusSuccess      = "Success"      // compiled (if compiled) and exited 0
	StatusFailed       = "Failed"       // the program failed: exit, signal, limit, timeout
	StatusSandboxError = "SandboxError" // rlm could not run it: nothing is said about the program
)

// Command statuses (compile_result's and run_result's status).
const (
	CommandFinished          = "Finished"          // it ended by itself or by a resource limit
	CommandTimeLimitExceeded = "TimeLimitExceeded" // the wall clock or CPU budget ended it
	CommandError             = "Error"             // rlm failed to run it
)

// Request is the body of POST /run_code, SandboxFusion's RunCodeRequest.
type Request struct {
	Code     *string `json:"code"`
	Language string  `json:"language"`
	// Stdin null is empty input.
	Stdin *string `json:"stdin"`
	// CompileTimeout and RunTimeout are seconds of wall clock (SandboxFusion's
	// defaults: 10 each).
	CompileTimeout *float64 `json:"compile_timeout"`
	RunTimeout     *float64 `json:"run_timeout"`
	// MemoryLimitMB is -1 (the server's limit) or a positive number of MB.
	MemoryLimitMB *int64 `json:"memory_limit_MB"`
	// Files maps relative paths to base64 content; a null content is no file.
	Files map[string]*string `json:"files"`
	// FetchFiles are paths whose content comes back in the response's files.
	FetchFiles []string `json:"fetch_files"`
}

// CommandResult is SandboxFusion's CommandRunResult. Its stdout and stderr
// are never null; return_code is null when the time limit ended the run.
type CommandResult struct {
	Status        string  `json:"status"`
	ExecutionTime float64 `json:"execution_time"`
	ReturnCode    *int    `json:"return_code"`
	Stdout        string  `json:"stdout"`
	Stderr        string  `json:"stderr"`
}

// Response is the body answering POST /run_code (HTTP 200 for every
// verdict), SandboxFusion's RunCodeResponse plus ended_by: rlm's precise
// reason the run ended (exit, memory_limit, timeout, ...), which
// SandboxFusion's three statuses cannot say.
type Response struct {
	Status          string            `json:"status"`
	Message         string            `json:"message"`
	CompileResult   *CommandResult    `json:"compile_result"`
	RunResult       *CommandResult    `json:"run_result"`
	ExecutorPodName string            `json:"executor_pod_name"`
	Files           map[string]string `json:"files"`
	EndedBy         string            `json:"ended_by,omitempty"`
	// compiled: a compiler ran for this request (not the compile cache);
	// /judge reports it per case.
	compiled bool
}

// validationError is FastAPI's 422 body, as SandboxFusion answers a request
// that does not fit its model: {"detail": [{"loc", "msg", "type"}]}.
type validationError struct {
	Detail []validationDetail `json:"detail"`
}

type validationDetail struct {
	Loc  []string `json:"loc"`
	Msg  string   `json:"msg"`
	Type string   `json:"type"`
}

func invalid(field, msg string) validationError {
	return validationError{Detail: []validationDetail{{Loc: []string{"body", field}, Msg: msg, Type: "value_error"}}}
}
