package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rlmkit/rlm/core/sandbox"
)

// The sandbox endpoints of rlm's own API: commands and files of a session
// (core/sandbox), the shape E2B's front end translates onto.
//
//	POST   /sessions/{id}/commands              run one (or start it, background)
//	GET    /sessions/{id}/commands              the running ones
//	POST   /sessions/{id}/commands/{pid}/signal signal one
//	GET    /sessions/{id}/files?path=P          a file's bytes, or a directory's entries
//	PUT    /sessions/{id}/files?path=P          write a file (the body)
//	DELETE /sessions/{id}/files?path=P          remove a file or directory

// CommandRequest is the body of POST /sessions/{id}/commands.
type CommandRequest struct {
	// Command is a shell line, run by /bin/sh -c; or give Cmd and Args.
	Command string   `json:"command,omitempty"`
	Cmd     string   `json:"cmd,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Cwd is relative to the session's working directory ("": itself).
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// Background answers at once with the pid; the command runs on until
	// it exits, is signalled, or the session ends.
	Background bool `json:"background,omitempty"`
	// TimeoutSeconds bounds a foreground command (default: the server's
	// default timeout); when it passes, the command is killed.
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty"`
}

// CommandResult answers POST /sessions/{id}/commands.
type CommandResult struct {
	PID      int    `json:"pid"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

// SignalRequest is the body of POST /sessions/{id}/commands/{pid}/signal.
type SignalRequest struct {
	// Signal is a number or a name (SIGTERM, TERM, KILL, INT, HUP).
	Signal string `json:"signal"`
}

// sandboxRoute routes /sessions/{id}/commands... and /files (parts are
// the path's segments).
func (s *Server) sandboxRoute(parts []string, allow func(string, string, http.HandlerFunc) (string, http.HandlerFunc)) (string, http.HandlerFunc) {
	id := parts[1]
	switch {
	case len(parts) == 3 && parts[2] == "commands":
		return allow("/sessions/{id}/commands", "GET,POST", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				s.handleCommand(w, r, id)
				return
			}
			s.withSandbox(w, id, func(box *sandbox.Sandbox) {
				list, err := box.Processes(r.Context())
				if err != nil {
					writeError(w, sandboxError(err))
					return
				}
				writeJSON(w, http.StatusOK, map[string]any{"commands": list})
			})
		})
	case len(parts) == 5 && parts[2] == "commands" && parts[4] == "signal":
		return allow("/sessions/{id}/commands/{pid}/signal", "POST", func(w http.ResponseWriter, r *http.Request) {
			s.handleSignal(w, r, id, parts[3])
		})
	case len(parts) == 3 && parts[2] == "files":
		return allow("/sessions/{id}/files", "GET,PUT,DELETE", func(w http.ResponseWriter, r *http.Request) {
			s.handleFiles(w, r, id)
		})
	}
	return "other", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiErr(http.StatusNotFound, CodeNotFound, "no such endpoint: "+r.URL.Path+" (see GET /openapi.json)"))
	}
}

func (s *Server) withSandbox(w http.ResponseWriter, id string, f func(*sandbox.Sandbox)) {
	box, done, err := s.Sandbox(id)
	if err != nil {
		writeError(w, sandboxError(err))
		return
	}
	defer done()
	f(box)
}

func (s *Server) handleCommand(w http.ResponseWriter, r *http.Request, id string) {
	var req CommandRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	cmd := sandbox.Command{Cmd: req.Cmd, Args: req.Args, Cwd: req.Cwd, Env: req.Env}
	switch {
	case req.Command != "" && req.Cmd != "":
		writeError(w, badField("command", "give either command (a shell line) or cmd and args, not both"))
		return
	case req.Command != "":
		cmd.Cmd, cmd.Args = "/bin/sh", []string{"-c", req.Command}
	case req.Cmd == "":
		writeError(w, badField("command", "is required: a shell line such as \"ls -la\" (or cmd and args)"))
		return
	}
	timeout := s.cfg.DefaultTimeout
	if req.TimeoutSeconds != nil {
		t, e := s.timeout(req.TimeoutSeconds, nil)
		if e != nil {
			writeError(w, e)
			return
		}
		timeout = t
	}
	s.withSandbox(w, id, func(box *sandbox.Sandbox) {
		ctx := r.Context()
		pid, err := box.Start(ctx, cmd)
		if err != nil {
			writeError(w, sandboxError(err))
			return
		}
		if req.Background {
			writeJSON(w, http.StatusCreated, CommandResult{PID: pid})
			return
		}
		res, err := RunCommand(ctx, box, pid, timeout, nil)
		if err != nil {
			writeError(w, sandboxError(err))
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
}

// RunCommand follows command pid to its end, killing it when timeout
// passes or ctx ends, and collects its output (each chunk also given to
// onOutput when not nil).
func RunCommand(ctx context.Context, box *sandbox.Sandbox, pid int, timeout time.Duration, onOutput func(stderr bool, data []byte) error) (*CommandResult, error) {
	res := &CommandResult{PID: pid}
	var out, errb []byte
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		_ = box.Signal(context.WithoutCancel(ctx), pid, "SIGKILL")
	})
	defer timer.Stop()
	stop := context.AfterFunc(ctx, func() { _ = box.Signal(context.WithoutCancel(ctx), pid, "SIGKILL") })
	defer stop()
	ex, err := box.Wait(context.WithoutCancel(ctx), pid, func(stderr bool, b []byte) error {
		if stderr {
			errb = append(errb, b...)
		} else {
			out = append(out, b...)
		}
		if onOutput != nil {
			return onOutput(stderr, b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Stdout, res.Stderr, res.TimedOut = string(out), string(errb), timedOut.Load()
	code := ex.Code
	res.ExitCode, res.Signal = &code, ex.Signal
	return res, nil
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request, id, pidText string) {
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		writeError(w, apiErr(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("%q is not a pid: give the pid POST /sessions/%s/commands answered", pidText, id)))
		return
	}
	var req SignalRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	sig, ok := sandbox.ParseSignal(req.Signal)
	if !ok {
		writeError(w, badField("signal", "%q is not a signal: give a number or a name such as SIGTERM or KILL", req.Signal))
		return
	}
	s.withSandbox(w, id, func(box *sandbox.Sandbox) {
		if err := box.Signal(r.Context(), pid, sig); err != nil {
			writeError(w, sandboxError(err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Server) handleFiles(w http.ResponseWriter, r *http.Request, id string) {
	path := r.URL.Query().Get("path")
	if _, err := sandbox.Clean(path); err != nil {
		writeError(w, sandboxError(err))
		return
	}
	s.withSandbox(w, id, func(box *sandbox.Sandbox) {
		ctx := r.Context()
		switch r.Method {
		case http.MethodPut:
			data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.BodyLimit))
			if err != nil {
				writeError(w, apiErr(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", s.cfg.BodyLimit)))
				return
			}
			e, err := box.WriteFile(ctx, path, data)
			if err != nil {
				writeError(w, sandboxError(err))
				return
			}
			writeJSON(w, http.StatusOK, e)
		case http.MethodDelete:
			if err := box.Remove(ctx, path); err != nil {
				writeError(w, sandboxError(err))
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			e, err := box.Stat(ctx, path)
			if err != nil {
				writeError(w, sandboxError(err))
				return
			}
			if e.Type == "dir" {
				list, err := box.List(ctx, path, 1)
				if err != nil {
					writeError(w, sandboxError(err))
					return
				}
				writeJSON(w, http.StatusOK, map[string]any{"entries": list})
				return
			}
			data, err := box.ReadFile(ctx, path, s.cfg.BodyLimit)
			if err != nil {
				writeError(w, sandboxError(err))
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(data)
		}
	})
}
