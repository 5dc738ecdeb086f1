package sandboxfusion

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core/server"
)

// clientMargin is what a request's wait for a slot leaves of its
// client's patience beyond the run's wall clock: starting the sandbox,
// killing and reaping a program that ran out its time (a 1 GB one takes a
// while to free), and the answer's travel. 16 programs timing out at once
// on 2 loaded cores took 1 s over their wall clock; 2 s of margin still
// let verl's read timeout fire on some, 5 s none.
const clientMargin = 5 * time.Second

// slotWait is how long a request waits for a run slot before the 504
// that SandboxFusion's clients retry. verl reads an answer for
// compile_timeout + run_timeout + 10 s (its API_TIMEOUT); the request
// itself takes at most run_timeout, plus compile_timeout for a compiled
// language, so the wait is what is left of that patience less a margin:
// the client never sees a read timeout, which it would count as a failed
// test, and a python request (whose compile_timeout buys it no compile)
// waits 15 s at the defaults rather than giving up early.
func slotWait(req *Request, compiled bool) time.Duration {
	ct := defaultTimeout
	if req.CompileTimeout != nil {
		ct = *req.CompileTimeout
	}
	run := defaultTimeout
	if req.RunTimeout != nil {
		run = *req.RunTimeout
	}
	spent := run
	if compiled {
		spent += ct
	}
	patience := time.Duration((ct + run + 10 - spent) * float64(time.Second))
	return max(patience-clientMargin, time.Second)
}

// compileTimeout is a compiled language's compile_timeout as the
// compiler's wall clock, 0 for the others.
func compileTimeout(req *Request, lang language) time.Duration {
	if !lang.compiled {
		return 0
	}
	ct := defaultTimeout
	if req.CompileTimeout != nil {
		ct = *req.CompileTimeout
	}
	return time.Duration(ct * float64(time.Second))
}

// Mount puts POST /run_code, GET /v1/ping and POST /judge on s, behind its token, body
// limit, request log and metrics.
func Mount(s *server.Server) {
	s.Handle("/run_code", RunCode(s))
	s.Handle("/v1/ping", http.HandlerFunc(ping))
	s.Handle("/judge", Judge(s))
}

// ping answers GET /v1/ping with the JSON string "pong", as SandboxFusion
// does; clients call it to wait for the server.
func ping(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed: use GET"})
		return
	}
	writeJSON(w, http.StatusOK, "pong")
}

// RunCode is the handler of POST /run_code. Every verdict on the program
// is HTTP 200; a request that does not fit the protocol is 422 (as
// FastAPI answers it); overload is a 504 after waiting for a slot, never
// a 429 or 503, since those clients count them as failed tests.
func RunCode(s *server.Server) http.Handler {
	pod, _ := os.Hostname()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if !decodePost(w, r, &req, "RunCodeRequest") {
			return
		}
		resp, status, body := run(s, r, &req)
		if body != nil {
			writeJSON(w, status, body)
			return
		}
		resp.ExecutorPodName = pod
		writeJSON(w, http.StatusOK, resp)
	})
}

// run answers one decoded request: a Response, or an HTTP status and a
// body for what is not a verdict.
func run(s *server.Server, r *http.Request, req *Request) (*Response, int, any) {
	name := req.Language
	if name == "" {
		name = "python"
	}
	lang, known := languages[name]
	if !known {
		if slices.Contains(unsupported, name) {
			return sandboxError(fmt.Sprintf("language %q is not supported by rlm: it has no runtime for it", name)), 0, nil
		}
		return nil, http.StatusUnprocessableEntity, invalid("language", fmt.Sprintf("unknown language %q (rlm runs: %s)", name, strings.Join(knownNames(), ", ")))
	}
	if !s.Enabled(lang.runtime) {
		return sandboxError(fmt.Sprintf("language %q needs the %s runtime, which is not enabled on this server: install %s", name, lang.runtime, lang.install)), 0, nil
	}
	ereq, verr := toExecute(req, lang)
	if verr != nil {
		return nil, http.StatusUnprocessableEntity, verr
	}
	resp, err := s.ExecuteWaiting(r.Context(), ereq, server.WaitOptions{Wait: slotWait(req, lang.compiled), MemoryBytes: memoryBytes(req), CompileTimeout: compileTimeout(req, lang)})
	var ae *server.APIError
	switch {
	case err == nil:
		return fromExecute(resp, req.FetchFiles, lang.compiled), 0, nil
	case errors.As(err, &ae) && (ae.Code == server.CodeQueueTimeout || ae.Code == server.CodeShuttingDown):
		// Retried by the clients, unlike 503.
		return nil, http.StatusGatewayTimeout, map[string]string{"detail": ae.Message}
	case errors.As(err, &ae) && ae.Status == http.StatusBadRequest:
		return nil, http.StatusUnprocessableEntity, invalid(strings.TrimPrefix(strings.SplitN(ae.Message, ":", 2)[0], "field "), ae.Message)
	case errors.As(err, &ae) && ae.Status == 499:
		return nil, 499, map[string]string{"detail": ae.Message}
	}
	out := sandboxError(err.Error())
	out.RunResult = &CommandResult{Status: CommandError}
	return out, 0, nil
}

func knownNames() []string {
	names := make([]string, 0, len(languages))
	for n := range languages {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodePost reads a POST's JSON body into v, or answers what is wrong as
// FastAPI would (405, 413, 422 naming schema) and returns false.
func decodePost(w http.ResponseWriter, r *http.Request, v any, schema string) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed: use POST"})
		return false
	}
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"detail": fmt.Sprintf("the body is over the limit of %d bytes", mbe.Limit)})
			return false
		}
		writeJSON(w, http.StatusUnprocessableEntity, invalid("body", "the body is not a valid "+schema+" JSON object: "+err.Error()))
		return false
	}
	return true
}
