package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core/sandbox"
	"github.com/rlmkit/rlm/core/server"
)

// interpreterPort is the E2b-Sandbox-Port of the code interpreter
// (@e2b/code-interpreter's JUPYTER_PORT).
const interpreterPort = "49999"

// executeRequest is the body of the code interpreter's POST /execute.
type executeRequest struct {
	Code      *string           `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// contextJSON is a code context.
type contextJSON struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// interpreter serves one request for the code interpreter.
func (h *handler) interpreter(w http.ResponseWriter, r *http.Request, b *box) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/health":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case p == "/execute" && r.Method == http.MethodPost:
		h.execute(w, r, b)
	case p == "/contexts" && r.Method == http.MethodPost:
		h.newContext(w, r, b)
	case p == "/contexts" && r.Method == http.MethodGet:
		h.mu.Lock()
		out := []contextJSON{}
		for id := range b.contexts {
			out = append(out, contextJSON{ID: id, Language: "python", Cwd: Home})
		}
		h.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
	case strings.HasPrefix(p, "/contexts/") && r.Method == http.MethodDelete:
		id := strings.TrimPrefix(p, "/contexts/")
		h.mu.Lock()
		_, ok := b.contexts[id]
		delete(b.contexts, id)
		h.mu.Unlock()
		if !ok {
			http.Error(w, fmt.Sprintf("no context %q in this sandbox", id), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, fmt.Sprintf("%s %s is not supported by rlm's code interpreter (it serves /execute and /contexts: see docs/e2b.md)", r.Method, p), http.StatusNotFound)
	}
}

func (h *handler) newContext(w http.ResponseWriter, r *http.Request, b *box) {
	var req struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "the body is not a JSON context request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if req.Language != "" && req.Language != "python" {
		http.Error(w, fmt.Sprintf("language %q: rlm's code interpreter runs python only (run other languages as commands)", req.Language), http.StatusBadRequest)
		return
	}
	if req.Cwd != "" && req.Cwd != Home {
		http.Error(w, fmt.Sprintf("cwd %q: a context's working directory is the workspace, %s (contexts share the interpreter's)", req.Cwd, Home), http.StatusBadRequest)
		return
	}
	box, done, err := h.srv.Sandbox(b.id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer done()
	id, err := box.NewContext(r.Context())
	if err != nil {
		http.Error(w, "creating the context: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.mu.Lock()
	b.contexts[id] = Home
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, contextJSON{ID: id, Language: "python", Cwd: Home})
}

func (h *handler) execute(w http.ResponseWriter, r *http.Request, b *box) {
	var req executeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxMessage)).Decode(&req); err != nil {
		http.Error(w, "the body is not a JSON execute request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if req.Code == nil {
		http.Error(w, "code is required", http.StatusBadRequest)
		return
	}
	if req.Language != "" && req.Language != "python" {
		http.Error(w, fmt.Sprintf("language %q: rlm's code interpreter runs python only (run other languages as commands)", req.Language), http.StatusBadRequest)
		return
	}
	if len(req.EnvVars) > 0 {
		http.Error(w, "envs per execution are not supported: give them when creating the sandbox (envs), or set os.environ in the code", http.StatusBadRequest)
		return
	}
	code := *req.Code
	if req.ContextID != "" && req.ContextID != "default" {
		h.mu.Lock()
		_, ok := b.contexts[req.ContextID]
		h.mu.Unlock()
		if !ok {
			http.Error(w, fmt.Sprintf("no context %q in this sandbox: create one with createCodeContext", req.ContextID), http.StatusNotFound)
			return
		}
		code = sandbox.ContextCell(req.ContextID, code)
	}
	// The answer starts now, so that the SDK's execution timeout
	// (timeoutMs, which runs from the response's headers) counts the cell:
	// when it passes the client goes away, which interrupts the cell. The
	// cell itself may run as long as the server allows.
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	enc := json.NewEncoder(w)
	secs := h.srv.MaxTimeout().Seconds()
	resp, err := h.srv.RunCell(r.Context(), b.id, &server.CellRequest{Code: &code, TimeoutSeconds: &secs})
	if err != nil {
		// too late for a status: the failure is the cell's error
		_ = enc.Encode(map[string]any{"type": "error", "name": "SandboxError", "value": err.Error(), "traceback": ""})
		_ = enc.Encode(map[string]any{"type": "end_of_execution"})
		return
	}
	h.mu.Lock()
	b.executions++
	n := b.executions
	h.mu.Unlock()
	now := float64(time.Now().UnixMicro())
	stderr, traceback := splitTraceback(resp.Stderr)
	if resp.Stdout != "" {
		_ = enc.Encode(map[string]any{"type": "stdout", "text": resp.Stdout, "timestamp": now})
	}
	if stderr != "" {
		_ = enc.Encode(map[string]any{"type": "stderr", "text": stderr, "timestamp": now})
	}
	if resp.Repr != nil {
		_ = enc.Encode(map[string]any{"type": "result", "text": *resp.Repr, "is_main_result": true})
	}
	if resp.Status != server.StatusSuccess {
		name, value := splitError(resp.Error, resp.Status)
		_ = enc.Encode(map[string]any{"type": "error", "name": name, "value": value, "traceback": traceback})
	}
	_ = enc.Encode(map[string]any{"type": "number_of_executions", "execution_count": n})
	_ = enc.Encode(map[string]any{"type": "end_of_execution"})
}

// splitTraceback separates a cell's stderr from the traceback the REPL
// wrote at its end, which E2B gives in the error instead.
func splitTraceback(stderr string) (string, string) {
	i := strings.LastIndex(stderr, "Traceback (most recent call last):")
	if i < 0 {
		return stderr, ""
	}
	return stderr[:i], stderr[i:]
}

// splitError splits "Name: value" into E2B's error name and value.
func splitError(msg, status string) (string, string) {
	if msg == "" {
		return status, "the cell ended with status " + status
	}
	if status == server.StatusTimeout {
		return "TimeoutError", msg
	}
	name, value, ok := strings.Cut(msg, ": ")
	if !ok || strings.ContainsAny(name, " \n") {
		return "Error", msg
	}
	return name, value
}
