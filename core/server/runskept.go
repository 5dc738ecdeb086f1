package server

import (
	"fmt"
	"net/http"

	"github.com/rlmkit/rlm/core/engine"
)

// Persistent runs: POST /runs {"keep": true} keeps the run's root loop
// after it ends (its REPL and the model's history, an
// engine.Conversation), and POST /runs {"continue": RUN_ID, "task": ...}
// continues it: the same variables, the history before the next task. A
// continued run may keep it again; the conversation passes from run to
// run, one at a time, and ends (its sandbox with it) when a run that
// holds it ends without "keep", when the run is deleted or forgotten
// (RunsConfig.Keep after it ended), or when the server stops. This is the
// reference implementation's persistent mode, which the Python client's
// RLM(persistent=True) drives.

// takeConversation hands run id's kept conversation to a new run.
// giveBack (nil when nothing was taken) returns it when the new run does
// not start.
func (s *Server) takeConversation(id string, req *RunRequest) (cv *engine.Conversation, giveBack func(), e *APIError) {
	if len(req.Context) > 0 {
		return nil, nil, badField("context", "a continued run keeps its REPL's `context`: put the new input in the task, or start a new run")
	}
	prev := s.runs().get(id)
	if prev == nil {
		return nil, nil, &APIError{Status: http.StatusNotFound, Code: CodeNotFound,
			Message: fmt.Sprintf("no run %s to continue: it never existed, was deleted, or was forgotten %s after it ended", id, s.runs().keep)}
	}
	prev.mu.Lock()
	defer prev.mu.Unlock()
	switch {
	case prev.final == nil:
		return nil, nil, &APIError{Status: http.StatusConflict, Code: CodeBusy, Message: fmt.Sprintf("run %s is still in progress: continue it after it ends", id)}
	case prev.conv == nil && prev.kept:
		return nil, nil, &APIError{Status: http.StatusConflict, Code: CodeBusy, Message: fmt.Sprintf("run %s was already continued: continue the run that continued it", id)}
	case prev.conv == nil:
		return nil, nil, &APIError{Status: http.StatusConflict, Code: CodeBusy, Message: fmt.Sprintf("run %s was not kept: start a run with \"keep\": true to continue it later", id)}
	}
	cv = prev.conv
	prev.conv = nil
	return cv, func() { prev.keepOrClose(cv, true) }, nil
}

// keepOrClose ends a run's hold on cv: kept for the next run when the
// request said so and the run ended with its REPL alive, else closed.
func (r *Run) keepOrClose(cv *engine.Conversation, keep bool) {
	if cv == nil {
		return
	}
	r.mu.Lock()
	if keep && !r.forgotten {
		r.conv, r.kept = cv, true
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	_ = cv.Close()
}

// forget closes a run's kept conversation when the table lets it go.
func (r *Run) forget() {
	r.mu.Lock()
	cv := r.conv
	r.conv, r.forgotten = nil, true
	r.mu.Unlock()
	if cv != nil {
		_ = cv.Close()
	}
}

// closeKept ends every kept conversation (the server stopping).
func (t *runTable) closeKept() {
	t.mu.Lock()
	runs := make([]*Run, 0, len(t.byID))
	for _, r := range t.byID {
		runs = append(runs, r)
	}
	t.mu.Unlock()
	for _, r := range runs {
		r.forget()
	}
}
