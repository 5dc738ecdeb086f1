package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/jsontext"
)

// Result statuses of /execute and session cells.
const (
	StatusSuccess       = "success"        // exited 0
	StatusError         = "error"          // non-zero exit, signal, crash
	StatusTimeout       = "timeout"        // the wall limit ended it
	StatusInstallError  = "install_error"  // requirements failed to install
	StatusLimitExceeded = "limit_exceeded" // memory, output, processes, disk or fuel
	StatusCancelled     = "cancelled"      // the client went away, the server stopped, or POST /sessions/{id}/interrupt
)

// ExecuteRequest is the body of POST /execute.
type ExecuteRequest struct {
	Code     *string `json:"code"`
	Language string  `json:"language,omitempty"`
	// TimeoutSeconds (the earlier server's field) or TimeoutMs, not both.
	TimeoutSeconds *float64          `json:"timeout_seconds,omitempty"`
	TimeoutMs      *int64            `json:"timeout_ms,omitempty"`
	Requirements   []string          `json:"requirements,omitempty"`
	Files          FileMap           `json:"files,omitempty"` // name → base64
	Stdin          string            `json:"stdin,omitempty"`
	Args           []string          `json:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	// Command, instead of Code, is agent-sandbox's request: one command
	// run on the shell runtime (agentsandbox.go).
	Command *string `json:"command,omitempty"`
}

// ExecuteResponse is the body answering POST /execute and session cells:
// the whole core.Result under its own JSON names (what `rlm exec --json`
// prints), plus the earlier sandbox server's names, kept so that its
// clients keep working. Its files_produced replaces the Result's: the
// earlier server's map of path to base64 content.
type ExecuteResponse struct {
	// Status comes first, as in the earlier server's answers.
	Status string `json:"status"`
	core.Result
	// ExecutionTimeMs is duration_ms under the earlier server's name.
	ExecutionTimeMs int64 `json:"execution_time_ms"`
	// FilesProduced maps a path relative to $OUTPUT_DIR to base64 content.
	FilesProduced map[string]string `json:"files_produced"`
	// Runtime is the runtime that ran it (python, golang, node, shell or a
	// plugin's name), the field `rlm exec --json` prints, so one parser
	// reads both; Language is the same name under the earlier server's
	// field, kept for its clients.
	Runtime  string `json:"runtime"`
	Language string `json:"language"`
	// Repr is value under the earlier name result: for a session cell, the
	// repr of its final expression (as a notebook shows it: `1+1` gives
	// "2"), capped like stdout; null when the cell ends in another
	// statement or a semicolon, the value is None, and always for
	// /execute, whose programs run as scripts.
	Repr *string `json:"result"`
}

// StatusOf maps a result to its status.
func StatusOf(r *core.Result) string {
	switch r.EndedBy {
	case ending.Timeout:
		return StatusTimeout
	case ending.InstallFailed:
		return StatusInstallError
	case ending.MemoryLimit, ending.OutputLimit, ending.ProcessLimit, ending.DiskLimit, ending.CPULimit, ending.Fuel:
		return StatusLimitExceeded
	case ending.Cancelled:
		return StatusCancelled
	}
	if r.TimedOut {
		return StatusTimeout
	}
	// A session cell that raised exits 0 with Error set.
	if r.ExitCode == 0 && r.Signal == "" && r.EndedBy == ending.Exit && r.Error == "" {
		return StatusSuccess
	}
	return StatusError
}

// Response builds the wire response from a result. A run that a limit
// ended gets, after its error, how to raise that limit in the server's
// terms: the request's timeout field, or the server's setting.
func Response(lang string, r *core.Result) ExecuteResponse {
	out := ExecuteResponse{
		Result:        *r,
		Status:        StatusOf(r),
		FilesProduced: map[string]string{},
		Runtime:       lang,
		Language:      lang,
		Repr:          r.Value,
	}
	if out.DurationMs == 0 && r.Duration > 0 {
		out.DurationMs = r.Duration.Milliseconds()
	}
	out.ExecutionTimeMs = out.DurationMs
	out.Error = hint(r.EndedBy, r.Error)
	if r.TimedOut {
		out.ExitCode = -1
	}
	for _, f := range r.Files {
		out.FilesProduced[f.Path] = f.Base64()
	}
	return out
}

// bodyReadTime bounds how long reading one request body may take.
const bodyReadTime = 60 * time.Second

// decodeBody reads one JSON object into v, refusing unknown fields, bodies
// over the limit (413, without reading the rest), other media types and
// bodies that are not UTF-8 (bad_json naming the first invalid byte). It
// is the one decoder of every JSON body the server reads.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) *APIError {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return apiErr(http.StatusUnsupportedMediaType, CodeUnsupportedMedia,
				fmt.Sprintf("Content-Type %q is not JSON: send application/json", ct))
		}
	}
	tooLarge := apiErr(http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
		fmt.Sprintf("request body is over the limit of %d bytes", s.cfg.BodyLimit))
	if r.ContentLength > s.cfg.BodyLimit {
		// Known too large up front: answer without reading a byte, and
		// close the connection so the client stops sending.
		w.Header().Set("Connection", "close")
		return tooLarge
	}
	// A body must arrive in bodyReadTime: a client trickling bytes would
	// otherwise hold its connection forever. (http.Server.ReadTimeout
	// cannot do this: it would also cancel long runs once the body is read.)
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(bodyReadTime)) == nil {
		defer rc.SetReadDeadline(time.Time{})
	}
	// The whole body is read before decoding, so that its bytes can be
	// checked: encoding/json turns bytes that are not UTF-8 into U+FFFD
	// without a word, which would run other code than the client sent.
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.BodyLimit))
	if err == nil {
		if err := jsontext.Check("the body", data); err != nil {
			return apiErr(http.StatusBadRequest, CodeBadJSON, err.Error())
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(v)
	}
	if err == nil {
		// One object and nothing after it.
		var extra json.RawMessage
		if err2 := dec.Decode(&extra); err2 != io.EOF {
			err = err2
			if err == nil {
				return apiErr(http.StatusBadRequest, CodeBadJSON, "the body holds more than one JSON value")
			}
		}
	}
	if err == nil {
		return nil
	}
	var (
		ae  *APIError
		ne  net.Error
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &ae): // a field's own UnmarshalJSON refused it
		return ae
	case errors.As(err, &mbe):
		return tooLarge
	case errors.As(err, &ne) && ne.Timeout():
		w.Header().Set("Connection", "close")
		return apiErr(http.StatusRequestTimeout, "body_timeout", fmt.Sprintf("the request body did not arrive within %s", bodyReadTime))
	case errors.Is(err, io.EOF):
		return apiErr(http.StatusBadRequest, CodeBadJSON, "the body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return apiErr(http.StatusBadRequest, CodeBadJSON, "the body ends in the middle of its JSON")
	case errors.As(err, &se):
		return apiErr(http.StatusBadRequest, CodeBadJSON, fmt.Sprintf("the body is not valid JSON (at byte %d): %v", se.Offset, se))
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return apiErr(http.StatusBadRequest, CodeBadJSON, fmt.Sprintf("the body must be a JSON object, not %s", te.Value))
		}
		return apiErr(http.StatusBadRequest, CodeBadField, fmt.Sprintf("field %s: want %s, got %s", field, jsonKind(te.Type.Kind().String()), te.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return apiErr(http.StatusBadRequest, CodeBadField, fmt.Sprintf("unknown field %s (see GET /openapi.json)", name))
	}
	return apiErr(http.StatusBadRequest, CodeBadJSON, "reading the body: "+err.Error())
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "bool":
		return "true or false"
	case "ptr":
		return "a value"
	}
	return "a number"
}

func badField(field, format string, args ...any) *APIError {
	return apiErr(http.StatusBadRequest, CodeBadField, "field "+field+": "+fmt.Sprintf(format, args...))
}

// language resolves a request's language to an enabled runtime.
func (s *Server) language(lang string) (string, *APIError) {
	if lang == "" {
		return s.cfg.Modes[0], nil
	}
	c := Canonical(lang)
	if _, ok := s.slots[c]; !ok {
		return "", badField("language", "%q is not enabled on this server (enabled: %s)", lang, strings.Join(s.cfg.Modes, ", "))
	}
	return c, nil
}

// timeout resolves timeout_seconds / timeout_ms, capped by MaxTimeout.
func (s *Server) timeout(secs *float64, ms *int64) (time.Duration, *APIError) {
	if secs != nil && ms != nil {
		return 0, badField("timeout_ms", "give timeout_seconds or timeout_ms, not both")
	}
	var want float64 // seconds
	switch {
	case secs != nil:
		if *secs <= 0 {
			return 0, badField("timeout_seconds", "must be positive, got %v", *secs)
		}
		want = *secs
	case ms != nil:
		if *ms <= 0 {
			return 0, badField("timeout_ms", "must be positive, got %d", *ms)
		}
		want = float64(*ms) / 1000
	default:
		return s.cfg.DefaultTimeout, nil
	}
	if want >= s.cfg.MaxTimeout.Seconds() {
		return s.cfg.MaxTimeout, nil
	}
	return max(time.Duration(want*float64(time.Second)), time.Millisecond), nil
}

// program validates an execute request and builds the program.
func (s *Server) program(req *ExecuteRequest) (core.Program, *APIError) {
	p := core.Program{ReturnFiles: true}
	if req.Code == nil {
		return p, badField("code", "is required")
	}
	if strings.TrimSpace(*req.Code) == "" {
		return p, badField("code", "is empty")
	}
	p.Code = *req.Code
	wall, e := s.timeout(req.TimeoutSeconds, req.TimeoutMs)
	if e != nil {
		return p, e
	}
	p.Limits = s.programLimits(wall)
	if p.Files, e = inputFiles(req.Files); e != nil {
		return p, e
	}
	// The kernel refuses one argument or variable over 128 KiB and a
	// command line plus environment over a few MiB; say so here rather
	// than fail the start.
	total := 0
	for i, a := range req.Args {
		if strings.ContainsRune(a, 0) {
			return p, badField(fmt.Sprintf("args[%d]", i), "contains a NUL byte")
		}
		if len(a) > maxArg {
			return p, badField(fmt.Sprintf("args[%d]", i), "is over %d bytes", maxArg)
		}
		total += len(a) + 1
	}
	p.Args = req.Args
	n, e := checkEnv(req.Env)
	if e != nil {
		return p, e
	}
	if total += n; total > maxArgs {
		return p, badField("args", "args and env together are over %d bytes", maxArgs)
	}
	p.Env = req.Env
	if e := checkRequirements(req.Requirements); e != nil {
		return p, e
	}
	p.Requirements = req.Requirements
	if req.Stdin != "" {
		p.Stdin = []byte(req.Stdin)
	}
	return p, nil
}

// maxArg is the most bytes the kernel takes in one argument or
// environment variable ("NAME=value"); maxArgs in all of them together
// (with a margin under its few MiB).
const maxArg, maxArgs = 128<<10 - 1, 1 << 20

// checkEnv validates a request's env field (/execute's and POST
// /sessions'), returning the bytes it takes on a command line. The names
// and values are core.CheckEnv's to judge, as on every other path; only
// the field is named here.
func checkEnv(env map[string]string) (int, *APIError) {
	var ee *core.EnvError
	if err := core.CheckEnv(env); errors.As(err, &ee) {
		return 0, badField(fmt.Sprintf("env[%q]", ee.Name), "%s", ee.Reason)
	}
	total := 0
	for k, v := range env {
		if len(k)+len(v)+1 > maxArg {
			return 0, badField(fmt.Sprintf("env[%q]", k), "is over %d bytes", maxArg)
		}
		total += len(k) + len(v) + 2
	}
	if total > maxArgs {
		return 0, badField("env", "is over %d bytes in all", maxArgs)
	}
	return total, nil
}

// checkRequirements validates a request's requirements field (/execute's
// and POST /sessions'); the runtime judges what each one names.
func checkRequirements(reqs []string) *APIError {
	for i, r := range reqs {
		if strings.TrimSpace(r) == "" || strings.ContainsRune(r, 0) {
			return badField(fmt.Sprintf("requirements[%d]", i), "is empty or contains a NUL byte")
		}
	}
	return nil
}

// FileMap is a request's files, name → base64 content. It has its own
// type so that a null content is refused while decoding: into a plain
// map[string]string encoding/json would turn {"x": null} into an empty
// file x without a word, and afterwards null and "" cannot be told apart.
type FileMap map[string]string

// UnmarshalJSON decodes the map, refusing a null content with the
// field's name (decodeBody answers the *APIError as it is).
func (m *FileMap) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil { // files: null is no files, as when it is left out
		*m = nil
		return nil
	}
	out := make(FileMap, len(raw))
	for n, v := range raw {
		var content *string
		if err := json.Unmarshal(v, &content); err != nil {
			return badField(fmt.Sprintf("files[%q]", n), "want a base64 string, got %s", v)
		}
		if content == nil {
			return badField(fmt.Sprintf("files[%q]", n), `is null: give the content as a base64 string ("" for an empty file)`)
		}
		out[n] = *content
	}
	*m = out
	return nil
}

// inputFiles validates a request's files (name → base64), for /execute
// and session cells alike: names relative, without "..", not naming one
// file twice; content standard base64, padded or not. The files come back
// in name order.
func inputFiles(files FileMap) ([]core.File, *APIError) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[string]string{}
	var out []core.File
	for _, n := range names {
		field := fmt.Sprintf("files[%q]", n)
		clean, err := core.CleanName(n)
		if err != nil {
			return nil, badField(field, "%v", err)
		}
		if prev, dup := seen[clean]; dup {
			return nil, badField(field, "names the same file as %q", prev)
		}
		seen[clean] = n
		data, err := base64.StdEncoding.DecodeString(files[n])
		if err != nil {
			data, err = base64.RawStdEncoding.DecodeString(files[n])
		}
		if err != nil {
			return nil, badField(field, "is not valid base64")
		}
		out = append(out, core.File{Path: clean, Data: data})
	}
	return out, nil
}

// busy is the 429 answer when every slot is taken and the queue is full.
func (s *Server) busy() *APIError {
	s.metrics.rejected.Inc()
	return &APIError{Status: http.StatusTooManyRequests, Code: CodeBusy, RetryAfter: s.retryAfter(),
		Message: fmt.Sprintf("all %d run slots are busy and the queue (%d) is full; retry later", s.cfg.MaxConcurrent, s.cfg.Queue)}
}

// enter admits a request that will run something before its body is read,
// so that no more than slots+queue bodies are ever held; leave must follow.
func (s *Server) enter(w http.ResponseWriter) bool {
	if s.limit.enter() {
		return true
	}
	w.Header().Set("Connection", "close") // its body is not read
	writeError(w, s.busy())
	return false
}

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) {
	serveRun(s, w, r, s.execute)
}

// serveRun answers a request that runs code (POST /execute and
// /sessions/{id}/execute, which differ only in their body and in what runs
// it): it takes a place in the queue before the body is read, and logs the
// runtime and the result's status.
func serveRun[Req any](s *Server, w http.ResponseWriter, r *http.Request, run func(context.Context, *Req) (string, *ExecuteResponse, *APIError)) {
	if !s.enter(w) {
		return
	}
	defer s.limit.leave()
	if resp, ok := decodeRun(s, w, r, run); ok {
		w.(*recorder).result = resp.Status
		writeJSON(w, http.StatusOK, resp)
	}
}

// decodeRun reads a request's JSON body into a Req and answers it with run,
// noting the runtime run reports on the access log. It writes the error
// response itself; ok says whether the caller has resp to answer with.
func decodeRun[Req, Resp any](s *Server, w http.ResponseWriter, r *http.Request, run func(context.Context, *Req) (string, Resp, *APIError)) (resp Resp, ok bool) {
	var req Req
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return resp, false
	}
	lang, resp, e := run(r.Context(), &req)
	w.(*recorder).language = lang
	if e != nil {
		writeError(w, e)
		return resp, false
	}
	return resp, true
}

// admit takes a run slot, or says why not.
func (s *Server) admit(ctx context.Context) (func(), *APIError) {
	if s.draining.Load() {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 1}
	}
	release, err := s.limit.acquire(ctx)
	switch {
	case errors.Is(err, errBusy):
		return nil, s.busy()
	case err != nil && s.draining.Load():
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Message: "the server is shutting down", RetryAfter: 1}
	case err != nil:
		return nil, clientGone()
	}
	return release, nil
}

// retryAfter estimates, in whole seconds, when a slot may be free.
func (s *Server) retryAfter() int {
	return max(1, int(s.cfg.QueueWait.Seconds()/4))
}

// clientGone is "answered" to a client that went away; 499 is nginx's
// status for it and only shows in logs and metrics.
func clientGone() *APIError {
	return apiErr(499, "client_closed_request", "the client went away")
}

func (s *Server) runError(ctx context.Context, lang string, err error) *APIError {
	var (
		ae      *APIError
		refused *core.RefusedError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case ctx.Err() != nil && s.draining.Load():
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, RetryAfter: 1,
			Message: "the server stopped before the run finished (shutdown grace period over)"}
	case ctx.Err() != nil:
		return clientGone()
	case errors.As(err, &refused) && refused.Kind == core.Invalid:
		return apiErr(http.StatusBadRequest, CodeBadRequest, err.Error())
	case errors.As(err, &refused) && refused.Kind == core.Unavailable:
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeRuntimeUnavailable, Message: err.Error(), RetryAfter: 1}
	case errors.Is(err, core.ErrUnsupported):
		return apiErr(http.StatusNotImplemented, CodeUnsupported, fmt.Sprintf("the %s runtime does not support this: %v", lang, err))
	}
	return apiErr(http.StatusInternalServerError, CodeInternal, fmt.Sprintf("the %s runtime failed: %v", lang, err))
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
