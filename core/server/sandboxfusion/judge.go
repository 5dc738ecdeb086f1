package sandboxfusion

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/rlmkit/rlm/core/server"
)

// An RL trainer scores one sample against N test cases. Sent as N
// /run_code requests, a compiled sample is compiled N times and the
// trainer compares outputs itself, each in its own way. POST /judge takes
// the program once with its cases and answers a verdict per case and a
// summary: the first case compiles (or imports) the program, the compile
// cache serves the others, and each case runs as a program of its own (for
// python a child forked from a warm, sandboxed interpreter), so no case
// sees another's files, processes or state. It is /run_code per case on
// the same core (slots, limits, metrics), with ScaleBox's
// common_evaluate_batch as the model.

// JudgeRequest is the body of POST /judge: /run_code's fields for the
// program, and the cases.
type JudgeRequest struct {
	Request
	Cases []Case `json:"cases"`
	// Compare is how a case's stdout is compared with its expected_stdout:
	// "lines" (default: trailing spaces, tabs and \r of each line and
	// trailing empty lines are ignored, as most judges do), "tokens"
	// (whitespace-separated tokens equal) or "exact".
	Compare string `json:"compare"`
	// StopOnFailure skips the cases not yet started once one is not
	// accepted (they answer "skipped"). The first case runs alone, so its
	// failure skips all the others; later cases run a few at a time, so
	// some after a failing one may have run already.
	StopOnFailure bool `json:"stop_on_failure"`
	// Checker is a special judge (checker.go): python source defining
	// check(input, expected, output) -> bool, which decides every
	// stdin case that ran and exited 0 instead of Compare.
	Checker *string `json:"checker"`
}

// Case is one test: stdin and the expected stdout, or (python) an assert
// that runs after the program, in the same process.
type Case struct {
	Stdin          *string `json:"stdin"`
	ExpectedStdout *string `json:"expected_stdout"`
	Assert         *string `json:"assert"`
}

// Verdicts of a case.
const (
	Accepted            = "accepted"
	WrongAnswer         = "wrong_answer"
	TimeLimitExceeded   = "time_limit_exceeded"
	MemoryLimitExceeded = "memory_limit_exceeded"
	OutputLimitExceeded = "output_limit_exceeded"
	RuntimeError        = "runtime_error"
	CompileError        = "compile_error"
	SandboxErrorVerdict = "sandbox_error"
	Skipped             = "skipped"
)

// CaseResult is one case's verdict and its run.
type CaseResult struct {
	Verdict   string         `json:"verdict"`
	RunResult *CommandResult `json:"run_result"`
	EndedBy   string         `json:"ended_by,omitempty"`
	Message   string         `json:"message,omitempty"`
	// Compiled says a compiler ran for this case; the compile cache
	// serves every case after the first.
	Compiled bool `json:"compiled,omitempty"`
}

// JudgeResponse answers POST /judge (HTTP 200 for every verdict): Success
// when every case is accepted, Failed when one is not, SandboxError when
// rlm could not judge one.
type JudgeResponse struct {
	Status        string         `json:"status"`
	Accepted      int            `json:"accepted"`
	Total         int            `json:"total"`
	CompileResult *CommandResult `json:"compile_result"`
	Cases         []CaseResult   `json:"cases"`
}

// maxCases bounds a request; caseParallelism is how many of its cases wait
// for run slots at once (the server's slots bound how many run).
const (
	maxCases        = 1000
	caseParallelism = 8
)

// Judge is the handler of POST /judge.
func Judge(s *server.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req JudgeRequest
		if !decodePost(w, r, &req, "JudgeRequest") {
			return
		}
		if v := checkJudge(&req); v != nil {
			writeJSON(w, http.StatusUnprocessableEntity, v)
			return
		}
		runCase := func(c Case) (*Response, int, any) {
			one := req.Request
			one.Stdin, one.FetchFiles = c.Stdin, nil
			if c.Assert != nil {
				code := *req.Code + "\n\n" + *c.Assert + "\n"
				one.Code = &code
			}
			return run(s, r, &one)
		}
		// check hands a case that ran cleanly to the special judge.
		check := func(res *CaseResult, c Case) (int, any) {
			if req.Checker == nil || (res.Verdict != Accepted && res.Verdict != WrongAnswer) {
				return 0, nil
			}
			return runChecker(s, r, &req, c, res)
		}
		out := &JudgeResponse{Total: len(req.Cases), Cases: make([]CaseResult, len(req.Cases))}
		// The first case alone: it compiles (or fails to), and a compile
		// error is every case's verdict without running any.
		first, status, body := runCase(req.Cases[0])
		if body != nil {
			writeJSON(w, status, body)
			return
		}
		out.CompileResult = first.CompileResult
		out.Cases[0] = verdict(first, req.Cases[0], req.Compare)
		if status, body := check(&out.Cases[0], req.Cases[0]); body != nil {
			writeJSON(w, status, body)
			return
		}
		if out.Cases[0].Verdict == CompileError {
			for i := 1; i < len(out.Cases); i++ {
				out.Cases[i] = CaseResult{Verdict: CompileError}
			}
			writeJSON(w, http.StatusOK, summarize(out))
			return
		}
		var (
			mu     sync.Mutex
			failed = out.Cases[0].Verdict != Accepted
			abort  *struct {
				status int
				body   any
			}
			wg      sync.WaitGroup
			workers = make(chan struct{}, caseParallelism)
		)
		for i := 1; i < len(req.Cases); i++ {
			mu.Lock()
			stop := (req.StopOnFailure && failed) || abort != nil
			mu.Unlock()
			if stop {
				out.Cases[i] = CaseResult{Verdict: Skipped}
				continue
			}
			workers <- struct{}{}
			wg.Add(1)
			go func(i int) {
				defer func() { <-workers; wg.Done() }()
				mu.Lock()
				stop := (req.StopOnFailure && failed) || abort != nil
				mu.Unlock()
				if stop {
					out.Cases[i] = CaseResult{Verdict: Skipped}
					return
				}
				resp, status, body := runCase(req.Cases[i])
				var res CaseResult
				if body == nil {
					res = verdict(resp, req.Cases[i], req.Compare)
					status, body = check(&res, req.Cases[i])
				}
				mu.Lock()
				defer mu.Unlock()
				if body != nil {
					if abort == nil {
						abort = &struct {
							status int
							body   any
						}{status, body}
					}
					return
				}
				out.Cases[i] = res
				failed = failed || res.Verdict != Accepted
			}(i)
		}
		wg.Wait()
		if abort != nil {
			// Overload (504) or a client gone: an answer the client retries,
			// never a verdict on the sample.
			writeJSON(w, abort.status, abort.body)
			return
		}
		writeJSON(w, http.StatusOK, summarize(out))
	})
}

func checkJudge(req *JudgeRequest) *validationError {
	fail := func(field, msg string) *validationError { v := invalid(field, msg); return &v }
	switch {
	case req.Code == nil:
		return fail("code", "field required")
	case len(req.Cases) == 0:
		return fail("cases", "at least one case is required")
	case len(req.Cases) > maxCases:
		return fail("cases", fmt.Sprintf("at most %d cases in one request, got %d", maxCases, len(req.Cases)))
	case len(req.FetchFiles) > 0:
		return fail("fetch_files", "not taken by /judge: each case's files stay in its own sandbox")
	}
	switch req.Compare {
	case "", "lines", "tokens", "exact":
	default:
		return fail("compare", fmt.Sprintf("unknown comparison %q: use lines, tokens or exact", req.Compare))
	}
	lang := req.Language
	if lang == "" {
		lang = "python"
	}
	for i, c := range req.Cases {
		if c.Assert != nil && (c.Stdin != nil || c.ExpectedStdout != nil) {
			return fail(fmt.Sprintf("cases[%d]", i), "a case is an assert or stdin/expected_stdout, not both")
		}
		if c.Assert != nil && req.Checker != nil {
			return fail(fmt.Sprintf("cases[%d].assert", i), "a checker judges stdin cases; an assert case is its own check")
		}
		if c.Assert != nil && lang != "python" {
			return fail(fmt.Sprintf("cases[%d].assert", i), "assert cases are python code; use stdin and expected_stdout for "+lang)
		}
	}
	return nil
}

// verdict judges one case from its /run_code answer.
func verdict(resp *Response, c Case, compare string) CaseResult {
	out := CaseResult{RunResult: resp.RunResult, EndedBy: resp.EndedBy, Message: resp.Message, Compiled: resp.compiled}
	switch {
	case resp.Status == StatusSandboxError:
		out.Verdict = SandboxErrorVerdict
	case resp.CompileResult != nil && resp.RunResult == nil:
		out.Verdict = CompileError
	case resp.RunResult == nil:
		out.Verdict = SandboxErrorVerdict
	case resp.RunResult.Status == CommandTimeLimitExceeded:
		out.Verdict = TimeLimitExceeded
	case resp.EndedBy == "memory_limit":
		out.Verdict = MemoryLimitExceeded
	case resp.EndedBy == "output_limit":
		out.Verdict = OutputLimitExceeded
	case resp.RunResult.ReturnCode == nil || *resp.RunResult.ReturnCode != 0:
		out.Verdict = RuntimeError
		if c.Assert != nil && strings.Contains(resp.RunResult.Stderr, "AssertionError") {
			out.Verdict = WrongAnswer
		}
	case c.ExpectedStdout != nil && !SameOutput(resp.RunResult.Stdout, *c.ExpectedStdout, compare):
		out.Verdict = WrongAnswer
	default:
		out.Verdict = Accepted
	}
	return out
}

func summarize(out *JudgeResponse) *JudgeResponse {
	out.Status = StatusSuccess
	for _, c := range out.Cases {
		switch c.Verdict {
		case Accepted:
			out.Accepted++
		case SandboxErrorVerdict:
			out.Status = StatusSandboxError
		default:
			if out.Status == StatusSuccess {
				out.Status = StatusFailed
			}
		}
	}
	return out
}

// SameOutput compares a program's output with the expected one as the
// comparison mode says: "lines" (the default) ignores trailing spaces,
// tabs and carriage returns on each line and trailing empty lines;
// "tokens" compares whitespace-separated tokens; "exact" compares bytes.
func SameOutput(got, want, mode string) bool {
	switch mode {
	case "exact":
		return got == want
	case "tokens":
		a, b := strings.Fields(got), strings.Fields(want)
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	return normalizeLines(got) == normalizeLines(want)
}

func normalizeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}
