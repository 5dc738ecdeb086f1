package sandboxfusion

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/rlmkit/rlm/core/server"
)

// A special judge (JudgeRequest.Checker) decides a case whose output has
// more than one right answer (any shortest path, floats within a
// tolerance). It is python source defining
//
//	check(input: str, expected: str | None, output: str) -> bool
//
// and it runs as model-written code does, in a sandbox of its own after
// the case: the judged program never sees it, and a checker that crashes
// or hangs is the case's sandbox_error, never an accepted verdict.

// checkerDriver follows the checker's source: it calls check on the case
// and prints the verdict behind a marker, so that what check prints
// itself cannot pass for one.
const checkerDriver = `

def _rlm_run_checker():
    import json, sys
    case = json.load(sys.stdin)
    verdict = check(case["input"], case["expected"], case["output"])
    if not isinstance(verdict, bool):
        raise TypeError("check must return True or False, not %s" % type(verdict).__name__)
    sys.stdout.write("\n` + checkerMark + `%s\n" % ("accepted" if verdict else "wrong"))

_rlm_run_checker()
`

const checkerMark = "rlm-checker-verdict:"

// runChecker judges out (a case that ran and exited 0) with the request's
// checker: Accepted or WrongAnswer, or SandboxErrorVerdict with the
// checker's failure as the message. A non-nil body is an answer that is
// not a verdict (overload, a client gone), as from run.
func runChecker(s *server.Server, r *http.Request, req *JudgeRequest, c Case, out *CaseResult) (int, any) {
	input, expected := "", (*string)(nil)
	if c.Stdin != nil {
		input = *c.Stdin
	}
	if c.ExpectedStdout != nil {
		expected = c.ExpectedStdout
	}
	stdin, _ := json.Marshal(map[string]any{"input": input, "expected": expected, "output": out.RunResult.Stdout})
	code := *req.Checker + checkerDriver
	in := string(stdin)
	resp, status, body := run(s, r, &Request{Code: &code, Language: "python", Stdin: &in, RunTimeout: req.RunTimeout, MemoryLimitMB: req.MemoryLimitMB})
	if body != nil {
		return status, body
	}
	i := strings.LastIndex(resp.RunResult.stdoutOrEmpty(), "\n"+checkerMark)
	switch {
	case resp.Status == StatusSuccess && i >= 0:
		if strings.HasPrefix(resp.RunResult.Stdout[i+1+len(checkerMark):], "accepted") {
			out.Verdict = Accepted
		} else {
			out.Verdict = WrongAnswer
		}
	default:
		out.Verdict = SandboxErrorVerdict
		out.Message = "the checker failed: " + checkerFailure(resp)
	}
	return 0, nil
}

// checkerFailure says why a checker run gave no verdict: its stderr's
// last line (the exception), or how it ended.
func checkerFailure(resp *Response) string {
	if resp.RunResult != nil {
		if lines := strings.Split(strings.TrimSpace(resp.RunResult.Stderr), "\n"); lines[len(lines)-1] != "" {
			return lines[len(lines)-1]
		}
	}
	if resp.Message != "" {
		return resp.Message
	}
	return "it ended by " + resp.EndedBy
}

func (c *CommandResult) stdoutOrEmpty() string {
	if c == nil {
		return ""
	}
	return c.Stdout
}
