// Package e2b is the E2B front end of rlm serve: the control plane, envd
// and code-interpreter wire of e2b.dev, so that the stock E2B SDKs (npm
// e2b and @e2b/code-interpreter, PyPI e2b and e2b-code-interpreter) drive
// rlm's sandboxes unchanged. Each E2B sandbox is one rlm session seen as a
// sandbox (core/sandbox): its code cells run in the session's REPL, its
// commands and file operations inside the same isolation, and its timeout
// is the session's deadline. docs/e2b.md says how to point the SDKs here.
//
// # Notes
//
//   - It listens on an address of its own (rlm serve --e2b-addr), because
//     E2B's data plane uses paths rlm's own API has too (/health,
//     /execute) and authenticates with its own headers. Both SDK
//     variables, E2B_API_URL and E2B_SANDBOX_URL, point at it; requests
//     that carry E2b-Sandbox-Id are the data plane (E2b-Sandbox-Port
//     49999 the code interpreter, any other envd), the rest the control
//     plane.
//   - The control plane takes X-API-Key: the server's token when it has
//     one (--token), anything otherwise. The data plane takes the
//     sandbox's own access token, returned at create and connect
//     (X-Access-Token, or E2B-Traffic-Access-Token, which the
//     code-interpreter SDK sends on every call).
//   - envd speaks Connect RPC. Only the JSON codec is served (the SDKs
//     send JSON: useBinaryFormat false), by a small hand-written envelope
//     codec (connect.go) rather than connectrpc.com/connect: serving
//     connect-go needs the generated protobuf code of envd's services,
//     which would be a second copy of e2b's .proto files to keep in step,
//     for six methods whose JSON is a handful of fields.
package e2b

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core/server"
)

// EnvdVersion is the envd version rlm's sandboxes report: the SDKs turn
// features on and off by it (0.5.7 and later: octet-stream uploads,
// closeStdin; no default user name is sent).
const EnvdVersion = "0.5.7"

// DefaultTimeout is a sandbox's lifetime when create gives none (E2B's).
const DefaultTimeout = 300 * time.Second

// Handler serves the E2B API over s. token, when not empty, is the API
// key the control plane requires.
func Handler(s *server.Server, token string) http.Handler {
	return &handler{srv: s, token: token, boxes: map[string]*box{}}
}

type handler struct {
	srv   *server.Server
	token string

	mu    sync.Mutex
	boxes map[string]*box
}

// box is what E2B knows of a sandbox beyond the session.
type box struct {
	id       string
	template string
	metadata map[string]string
	started  time.Time
	token    string
	// executions counts its code cells (E2B's execution_count).
	executions int
	// contexts are the code-interpreter contexts made in it (id → cwd).
	contexts map[string]string
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		h.dataPlane(w, r, id)
		return
	}
	if h.token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-API-Key")), []byte(h.token)) != 1 {
		apiError(w, http.StatusUnauthorized, "missing or wrong API key: set E2B_API_KEY to the token rlm serve was started with (--token)")
		return
	}
	h.controlPlane(w, r)
}

// apiError answers the control plane's way: {"code": status, "message"}.
func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// fromServer answers an error of the server's own API in E2B's terms.
func fromServer(w http.ResponseWriter, err error) {
	var ae *server.APIError
	if errors.As(err, &ae) {
		if ae.RetryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(ae.RetryAfter))
		}
		status := ae.Status
		if status == http.StatusGone {
			status = http.StatusNotFound // E2B has no 410: a sandbox is there or not
		}
		apiError(w, status, ae.Message)
		return
	}
	apiError(w, http.StatusInternalServerError, err.Error())
}

func (h *handler) controlPlane(w http.ResponseWriter, r *http.Request) {
	p := strings.Trim(r.URL.Path, "/")
	p = strings.TrimPrefix(p, "v2/")
	parts := strings.Split(p, "/")
	switch {
	case p == "sandboxes" && r.Method == http.MethodPost:
		h.create(w, r)
	case p == "sandboxes" && r.Method == http.MethodGet:
		h.list(w)
	case len(parts) == 2 && parts[0] == "sandboxes" && r.Method == http.MethodGet:
		h.info(w, parts[1])
	case len(parts) == 2 && parts[0] == "sandboxes" && r.Method == http.MethodDelete:
		h.kill(w, parts[1])
	case len(parts) == 3 && parts[0] == "sandboxes" && parts[2] == "timeout" && r.Method == http.MethodPost:
		h.setTimeout(w, r, parts[1])
	case len(parts) == 3 && parts[0] == "sandboxes" && parts[2] == "refreshes" && r.Method == http.MethodPost:
		h.refresh(w, r, parts[1])
	case len(parts) == 3 && parts[0] == "sandboxes" && (parts[2] == "connect" || parts[2] == "resume") && r.Method == http.MethodPost:
		h.connect(w, r, parts[1])
	case len(parts) == 3 && parts[0] == "sandboxes" && (parts[2] == "pause" || parts[2] == "snapshots" || parts[2] == "fork"):
		apiError(w, http.StatusNotImplemented, "rlm's sandboxes cannot be paused, snapshotted or forked: a sandbox lives in memory until it is killed or times out (see docs/e2b.md)")
	default:
		apiError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s (rlm serves E2B's sandboxes API; templates, volumes and snapshots are not supported: see docs/e2b.md)", r.Method, r.URL.Path))
	}
}

// createRequest is the body of POST /sandboxes (and /v2/sandboxes).
type createRequest struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int              `json:"timeout"` // seconds
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
	AutoPause  *bool             `json:"autoPause"`
}

// sandboxJSON is E2B's Sandbox (create, connect).
type sandboxJSON struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken string  `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// detailJSON is E2B's SandboxDetail / ListedSandbox.
type detailJSON struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	ClientID        string            `json:"clientID"`
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int               `json:"memoryMB"`
	DiskSizeMB      int               `json:"diskSizeMB"`
	Metadata        map[string]string `json:"metadata"`
	State           string            `json:"state"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain"`
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			apiError(w, http.StatusBadRequest, "the body is not a JSON sandbox request: "+err.Error())
			return
		}
	}
	if req.AutoPause != nil && *req.AutoPause {
		apiError(w, http.StatusBadRequest, "rlm's sandboxes cannot be paused: leave onTimeout at its default, kill")
		return
	}
	timeout := DefaultTimeout
	if req.Timeout != nil {
		if *req.Timeout <= 0 {
			apiError(w, http.StatusBadRequest, "timeout must be a positive number of seconds")
			return
		}
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	created, err := h.srv.OpenSession(r.Context(), &server.SessionRequest{Language: "python", Env: req.EnvVars})
	if err != nil {
		fromServer(w, err)
		return
	}
	if _, err := h.srv.SetDeadline(created.ID, time.Now().Add(timeout)); err != nil {
		fromServer(w, err)
		return
	}
	template := req.TemplateID
	if template == "" {
		template = "base"
	}
	b := &box{id: created.ID, template: template, metadata: req.Metadata, started: time.Now(), token: newToken(), contexts: map[string]string{}}
	if b.metadata == nil {
		b.metadata = map[string]string{}
	}
	h.mu.Lock()
	h.boxes[b.id] = b
	h.mu.Unlock()
	h.forgetEnded()
	writeJSON(w, http.StatusCreated, h.sandboxJSON(b))
}

func (h *handler) sandboxJSON(b *box) sandboxJSON {
	return sandboxJSON{SandboxID: b.id, TemplateID: b.template, ClientID: "rlm", EnvdVersion: EnvdVersion,
		EnvdAccessToken: b.token, TrafficAccessToken: b.token}
}

func newToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lookup finds the E2B sandbox id when its session is still open,
// forgetting one whose session ended (killed, timed out, its interpreter
// gone).
func (h *handler) lookup(id string) (*box, time.Time, bool) {
	h.mu.Lock()
	b := h.boxes[id]
	h.mu.Unlock()
	if b == nil {
		return nil, time.Time{}, false
	}
	end, err := h.srv.Deadline(id)
	if err != nil {
		h.mu.Lock()
		delete(h.boxes, id)
		h.mu.Unlock()
		return nil, time.Time{}, false
	}
	return b, end, true
}

// forgetEnded drops what it knows of sandboxes whose sessions ended
// without it hearing (timed out, idle, their interpreter gone), so that
// the table does not grow with every sandbox ever made.
func (h *handler) forgetEnded() {
	h.mu.Lock()
	ids := make([]string, 0, len(h.boxes))
	for id := range h.boxes {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.lookup(id) // forgets it when its session is gone
	}
}

func notFound(w http.ResponseWriter, id string) {
	apiError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found: it was killed, timed out, or never existed", id))
}

func (h *handler) detail(b *box, end time.Time, withToken bool) detailJSON {
	d := detailJSON{SandboxID: b.id, TemplateID: b.template, ClientID: "rlm", StartedAt: b.started.UTC(), EndAt: end.UTC(),
		CPUCount: 1, MemoryMB: 512, Metadata: b.metadata, State: "running", EnvdVersion: EnvdVersion}
	if withToken {
		d.EnvdAccessToken = b.token
	}
	return d
}

func (h *handler) list(w http.ResponseWriter) {
	out := []detailJSON{}
	for _, s := range h.srv.Sessions() {
		if b, end, ok := h.lookup(s.ID); ok {
			out = append(out, h.detail(b, end, false))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) info(w http.ResponseWriter, id string) {
	b, end, ok := h.lookup(id)
	if !ok {
		notFound(w, id)
		return
	}
	writeJSON(w, http.StatusOK, h.detail(b, end, true))
}

func (h *handler) kill(w http.ResponseWriter, id string) {
	if _, _, ok := h.lookup(id); !ok {
		notFound(w, id)
		return
	}
	h.mu.Lock()
	delete(h.boxes, id)
	h.mu.Unlock()
	if err := h.srv.CloseSession(id); err != nil {
		notFound(w, id)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// timeoutBody is the body of POST /sandboxes/{id}/timeout and /connect.
type timeoutBody struct {
	Timeout  *int `json:"timeout"`  // seconds
	Duration *int `json:"duration"` // seconds (refreshes)
}

func (h *handler) readTimeout(w http.ResponseWriter, r *http.Request) (timeoutBody, bool) {
	var t timeoutBody
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&t); err != nil {
			apiError(w, http.StatusBadRequest, "the body is not JSON: "+err.Error())
			return t, false
		}
	}
	return t, true
}

func (h *handler) setTimeout(w http.ResponseWriter, r *http.Request, id string) {
	t, ok := h.readTimeout(w, r)
	if !ok {
		return
	}
	if t.Timeout == nil || *t.Timeout <= 0 {
		apiError(w, http.StatusBadRequest, "timeout is required: a positive number of seconds from now")
		return
	}
	h.extend(w, id, time.Duration(*t.Timeout)*time.Second, http.StatusNoContent)
}

func (h *handler) refresh(w http.ResponseWriter, r *http.Request, id string) {
	t, ok := h.readTimeout(w, r)
	if !ok {
		return
	}
	d := DefaultTimeout
	if t.Duration != nil && *t.Duration > 0 {
		d = time.Duration(*t.Duration) * time.Second
	}
	h.extend(w, id, d, http.StatusNoContent)
}

// extend sets sandbox id to end d from now and answers status.
func (h *handler) extend(w http.ResponseWriter, id string, d time.Duration, status int) {
	if _, _, ok := h.lookup(id); !ok {
		notFound(w, id)
		return
	}
	if _, err := h.srv.SetDeadline(id, time.Now().Add(d)); err != nil {
		notFound(w, id)
		return
	}
	w.WriteHeader(status)
}

func (h *handler) connect(w http.ResponseWriter, r *http.Request, id string) {
	t, ok := h.readTimeout(w, r)
	if !ok {
		return
	}
	b, end, ok := h.lookup(id)
	if !ok {
		notFound(w, id)
		return
	}
	if t.Timeout != nil && *t.Timeout > 0 {
		// connect extends, never shortens, as E2B's does
		if want := time.Now().Add(time.Duration(*t.Timeout) * time.Second); want.After(end) {
			if _, err := h.srv.SetDeadline(id, want); err != nil {
				notFound(w, id)
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, h.sandboxJSON(b))
}

// authorized checks a data-plane request's access token.
func (b *box) authorized(r *http.Request) bool {
	for _, t := range []string{r.Header.Get("X-Access-Token"), r.Header.Get("E2B-Traffic-Access-Token")} {
		if t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(b.token)) == 1 {
			return true
		}
	}
	return false
}

func (h *handler) dataPlane(w http.ResponseWriter, r *http.Request, id string) {
	b, _, ok := h.lookup(id)
	if !ok {
		// E2B's proxy answers 502 for a sandbox that is gone; the SDKs
		// read it as "the sandbox was killed or timed out".
		http.Error(w, fmt.Sprintf("sandbox %q not found: it was killed, timed out, or never existed", id), http.StatusBadGateway)
		return
	}
	if !b.authorized(r) {
		http.Error(w, "missing or wrong access token: send the envdAccessToken that create or connect returned as X-Access-Token", http.StatusUnauthorized)
		return
	}
	if r.Header.Get("E2b-Sandbox-Port") == interpreterPort {
		h.interpreter(w, r, b)
		return
	}
	h.envd(w, r, b)
}
