package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/rlmkit/rlm/core/engine"
)

// The HTTP side of runs: POST /runs streams a run's events as NDJSON (one
// JSON object a line, flushed as each happens: engine.Event, with the
// run's RunStatus as a first line of type "run" and a last of type
// "result"); GET /runs/{id} is its
// status, GET /runs/{id}/events its events from the first (following it
// while it runs), POST /runs/{id}/cancel cancels it and DELETE /runs/{id}
// cancels and forgets it. NDJSON rather than server-sent events: every
// line is a whole JSON value a client of any language reads with its
// line reader, and the "type" field already names the event.

// ndjson is the streams' media type.
const ndjson = "application/x-ndjson"

func (s *Server) handleRunCreate(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Runs == nil {
		writeError(w, runsOff())
		return
	}
	// The body is read under the same bound as every request's; the run
	// itself then holds no place in the queue (its cells take slots).
	if !s.enter(w) {
		return
	}
	var req RunRequest
	e := s.decodeBody(w, r, &req)
	s.limit.leave()
	if e != nil {
		writeError(w, e)
		return
	}
	run, e := s.startRun(r.Context(), &req)
	if e != nil {
		writeError(w, e)
		return
	}
	w.Header().Set("X-Run-Id", run.ID())
	if req.Stream != nil && !*req.Stream {
		st := run.Wait(r.Context())
		w.(*recorder).result = st.Status
		writeJSON(w, http.StatusOK, st)
		return
	}
	s.streamRun(w, r.Context(), run)
}

// streamRun writes run's events as NDJSON, each flushed at once, then its
// status as a line of type "result".
func (s *Server) streamRun(w http.ResponseWriter, ctx context.Context, run *Run) {
	w.Header().Set("Content-Type", ndjson)
	w.Header().Set("Cache-Control", "no-cache")
	// A proxy (nginx) must pass each line on as it comes.
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	// The first line names the run (its id, for GET and cancel), so a
	// client that reads only the body has it.
	_ = enc.Encode(struct {
		Type string `json:"type"`
		RunStatus
	}{"run", run.Status()})
	_ = rc.Flush()
	// A line of type heartbeat after each quiet spell (a long model call),
	// so that a proxy or client with an idle timeout keeps the stream.
	heartbeat := func() error {
		if err := enc.Encode(struct {
			Type string `json:"type"`
		}{"heartbeat"}); err != nil {
			return err
		}
		return rc.Flush()
	}
	err := run.follow(ctx, func(ev engine.Event) error {
		if err := enc.Encode(ev); err != nil {
			return err
		}
		return rc.Flush()
	}, s.runHeartbeat(), heartbeat)
	if err != nil {
		return // the client went away: its run is cancelled with its context
	}
	st := run.Status()
	if rec, ok := w.(*recorder); ok {
		rec.result = st.Status
	}
	_ = enc.Encode(struct {
		Type string `json:"type"`
		RunStatus
	}{"result", st})
	_ = rc.Flush()
}

func (s *Server) handleRunGet(w http.ResponseWriter, _ *http.Request, id string) {
	run, err := s.GetRun(id)
	if err != nil {
		writeError(w, err.(*APIError))
		return
	}
	writeJSON(w, http.StatusOK, run.Status())
}

func (s *Server) handleRunEvents(w http.ResponseWriter, r *http.Request, id string) {
	run, err := s.GetRun(id)
	if err != nil {
		writeError(w, err.(*APIError))
		return
	}
	s.streamRun(w, r.Context(), run)
}

// handleRunCancel cancels a run and answers its status once it has ended
// (cancelling kills the block in progress, which is quick), or after a
// while with status still running.
func (s *Server) handleRunCancel(w http.ResponseWriter, r *http.Request, id string, forget bool) {
	var (
		run *Run
		err error
	)
	if forget {
		run, err = s.DeleteRun(id)
	} else if run, err = s.GetRun(id); err == nil {
		run.Cancel()
	}
	if err != nil {
		writeError(w, err.(*APIError))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	writeJSON(w, http.StatusOK, run.Wait(ctx))
}

// runHeartbeat is the quiet spell after which a stream gets a heartbeat.
func (s *Server) runHeartbeat() time.Duration {
	if h := s.cfg.Runs.Heartbeat; h > 0 {
		return h
	}
	return 15 * time.Second
}

// RunList is the body of GET /runs.
type RunList struct {
	Runs []RunStatus `json:"runs"`
}

func (s *Server) handleRunList(w http.ResponseWriter, _ *http.Request) {
	runs, err := s.Runs()
	if err != nil {
		writeError(w, err.(*APIError))
		return
	}
	writeJSON(w, http.StatusOK, RunList{Runs: runs})
}
