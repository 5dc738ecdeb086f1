package e2b

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core/sandbox"
	"github.com/rlmkit/rlm/core/server"
)

// Home is the sandbox's workspace as E2B's users name it: their user's
// home, the working directory of commands and cells.
const Home = "/home/user"

// envd serves one request for envd (E2b-Sandbox-Port 49983).
func (h *handler) envd(w http.ResponseWriter, r *http.Request, b *box) {
	box, done, err := h.srv.Sandbox(b.id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer done()
	switch p := r.URL.Path; {
	case p == "/health":
		w.WriteHeader(http.StatusNoContent)
	case p == "/files" && r.Method == http.MethodGet:
		h.readFile(w, r, box)
	case p == "/files" && r.Method == http.MethodPost:
		h.writeFiles(w, r, box)
	case r.Method != http.MethodPost:
		http.Error(w, "envd's RPCs are POSTs", http.StatusMethodNotAllowed)
	case p == "/process.Process/Start":
		processStart(w, r, box)
	case p == "/process.Process/Connect":
		processConnect(w, r, box)
	case p == "/process.Process/List":
		unary(w, r, func(*struct{}) (any, *rpcError) { return processList(r.Context(), box) })
	case p == "/process.Process/SendSignal":
		unary(w, r, func(req *signalRequest) (any, *rpcError) { return sendSignal(r.Context(), box, req) })
	case p == "/filesystem.Filesystem/Stat":
		unary(w, r, func(req *pathRequest) (any, *rpcError) {
			e, err := withPath(req.Path, func(p string) (sandbox.Entry, error) { return box.Stat(r.Context(), p) })
			return entryResponse(e, err)
		})
	case p == "/filesystem.Filesystem/MakeDir":
		unary(w, r, func(req *pathRequest) (any, *rpcError) {
			rel, e := toRel(req.Path)
			if e != nil {
				return nil, e
			}
			made, err := box.MakeDir(r.Context(), rel)
			if err != nil {
				return nil, fromSandbox(err)
			}
			if !made {
				return nil, rpcErr("already_exists", "%s exists already", req.Path)
			}
			ent, err := box.Stat(r.Context(), rel)
			return entryResponse(ent, err)
		})
	case p == "/filesystem.Filesystem/Remove":
		unary(w, r, func(req *pathRequest) (any, *rpcError) {
			_, err := withPath(req.Path, func(p string) (struct{}, error) { return struct{}{}, box.Remove(r.Context(), p) })
			if err != nil {
				return nil, fromSandbox(err)
			}
			return struct{}{}, nil
		})
	case p == "/filesystem.Filesystem/Move":
		unary(w, r, func(req *moveRequest) (any, *rpcError) {
			src, e := toRel(req.Source)
			if e != nil {
				return nil, e
			}
			dst, e := toRel(req.Destination)
			if e != nil {
				return nil, e
			}
			ent, err := box.Move(r.Context(), src, dst)
			return entryResponse(ent, err)
		})
	case p == "/filesystem.Filesystem/ListDir":
		unary(w, r, func(req *listRequest) (any, *rpcError) {
			list, err := withPath(req.Path, func(p string) ([]sandbox.Entry, error) { return box.List(r.Context(), p, req.Depth) })
			if err != nil {
				return nil, fromSandbox(err)
			}
			out := make([]entryInfo, 0, len(list))
			for _, e := range list {
				out = append(out, toEntryInfo(e))
			}
			return map[string]any{"entries": out}, nil
		})
	case strings.HasPrefix(p, "/process.Process/") || strings.HasPrefix(p, "/filesystem.Filesystem/"):
		e := rpcErr("unimplemented", "%s is not supported by rlm's sandboxes (no PTY, stdin or directory watching: see docs/e2b.md)", strings.TrimPrefix(p, "/"))
		if r.Header.Get("Content-Type") == "application/connect+json" {
			streamError(w, e)
			return
		}
		writeRPCError(w, e)
	default:
		http.Error(w, "no such envd endpoint: "+p, http.StatusNotFound)
	}
}

// toRel turns an E2B path (absolute under /home/user, ~-relative, or
// relative to it) into a workspace path.
func toRel(p string) (string, *rpcError) {
	switch {
	case p == "" || p == "~":
		return ".", nil
	case strings.HasPrefix(p, "~/"):
		p = p[2:]
	case strings.HasPrefix(p, "/"):
		c := path.Clean(p)
		if c == Home {
			return ".", nil
		}
		rest, ok := strings.CutPrefix(c, Home+"/")
		if !ok {
			return "", rpcErr("permission_denied", "path %q is outside the sandbox's workspace %s: rlm's sandboxes reach only their workspace", p, Home)
		}
		p = rest
	}
	c, err := sandbox.Clean(p)
	if err != nil {
		return "", rpcErr("invalid_argument", "%v", err)
	}
	return c, nil
}

// withPath runs f on req's path made a workspace path.
func withPath[T any](p string, f func(string) (T, error)) (T, error) {
	rel, e := toRel(p)
	if e != nil {
		var zero T
		return zero, e
	}
	return f(rel)
}

// fromSandbox is a sandbox operation's error as a Connect error.
func fromSandbox(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	msg := err.Error()
	switch sandbox.ErrorKind(err) {
	case sandbox.NotFound, sandbox.NoProcess:
		return rpcErr("not_found", "%s", msg)
	case sandbox.Exists:
		return rpcErr("already_exists", "%s", msg)
	case sandbox.Invalid:
		return rpcErr("invalid_argument", "%s", msg)
	case sandbox.Outside, sandbox.Permission:
		return rpcErr("permission_denied", "%s", msg)
	}
	var ae *server.APIError
	if errors.As(err, &ae) {
		return rpcErr("unavailable", "%s", ae.Message)
	}
	return rpcErr("internal", "%s", msg)
}

type pathRequest struct {
	Path string `json:"path"`
}

type listRequest struct {
	Path  string `json:"path"`
	Depth int    `json:"depth"`
}

type moveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// entryInfo is envd's filesystem.EntryInfo in proto3 JSON.
type entryInfo struct {
	Name          string `json:"name"`
	Type          int    `json:"type"` // FileType: 1 file, 2 directory, 3 symlink
	Path          string `json:"path"`
	Size          string `json:"size"` // int64: a string in proto3 JSON
	Mode          uint32 `json:"mode"`
	Permissions   string `json:"permissions"`
	Owner         string `json:"owner"`
	Group         string `json:"group"`
	ModifiedTime  string `json:"modifiedTime"`
	SymlinkTarget string `json:"symlinkTarget,omitempty"`
}

func absPath(rel string) string {
	if rel == "." || rel == "" {
		return Home
	}
	return Home + "/" + rel
}

func toEntryInfo(e sandbox.Entry) entryInfo {
	t := map[string]int{"file": 1, "dir": 2, "symlink": 3}[e.Type]
	mode := fs.FileMode(e.Mode)
	if e.Type == "dir" {
		mode |= fs.ModeDir
	}
	sec := int64(e.Mtime)
	mt := time.Unix(sec, int64((e.Mtime-float64(sec))*1e9)).UTC()
	name := e.Name
	if name == "" {
		name = path.Base(Home)
	}
	return entryInfo{Name: name, Type: t, Path: absPath(e.Path), Size: strconv.FormatInt(e.Size, 10), Mode: e.Mode,
		Permissions: mode.String(), Owner: "user", Group: "user", ModifiedTime: mt.Format(time.RFC3339Nano), SymlinkTarget: e.Target}
}

func entryResponse(e sandbox.Entry, err error) (any, *rpcError) {
	if err != nil {
		return nil, fromSandbox(err)
	}
	return map[string]any{"entry": toEntryInfo(e)}, nil
}

// readFile serves GET /files?path=P: the file's bytes.
func (h *handler) readFile(w http.ResponseWriter, r *http.Request, box *sandbox.Sandbox) {
	rel, e := toRel(r.URL.Query().Get("path"))
	if e != nil {
		writeRPCError(w, e)
		return
	}
	data, err := box.ReadFile(r.Context(), rel, maxMessage*4)
	if err != nil {
		fe := fromSandbox(err)
		if strings.Contains(fe.Message, "is a directory") {
			fe.Code = "invalid_argument"
		}
		writeJSON(w, fe.httpStatus(), map[string]any{"code": fe.httpStatus(), "message": fe.Message})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// writtenFile is one entry of POST /files' answer.
type writtenFile struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// writeFiles serves POST /files: multipart (each part "file", its file
// name the path when the query gives none) or one octet-stream body.
func (h *handler) writeFiles(w http.ResponseWriter, r *http.Request, box *sandbox.Sandbox) {
	fail := func(status int, format string, args ...any) {
		writeJSON(w, status, map[string]any{"code": status, "message": fmt.Sprintf(format, args...)})
	}
	body := http.MaxBytesReader(w, r.Body, maxMessage*4)
	qpath := r.URL.Query().Get("path")
	put := func(p string, data io.Reader) (*writtenFile, bool) {
		rel, e := toRel(p)
		if e != nil {
			fail(e.httpStatus(), "%s", e.Message)
			return nil, false
		}
		b, err := io.ReadAll(data)
		if err != nil {
			fail(http.StatusRequestEntityTooLarge, "the upload is unreadable or too large: %v", err)
			return nil, false
		}
		ent, err := box.WriteFile(r.Context(), rel, b)
		if err != nil {
			fe := fromSandbox(err)
			fail(fe.httpStatus(), "%s", fe.Message)
			return nil, false
		}
		return &writtenFile{Name: ent.Name, Type: "file", Path: absPath(ent.Path)}, true
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	out := []writtenFile{}
	switch mt {
	case "multipart/form-data":
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				fail(http.StatusBadRequest, "the multipart body is malformed: %v", err)
				return
			}
			p := qpath
			if p == "" {
				p = part.FileName()
			}
			f, ok := put(p, part)
			if !ok {
				return
			}
			out = append(out, *f)
		}
	case "application/octet-stream":
		if r.Header.Get("Content-Encoding") != "" {
			fail(http.StatusBadRequest, "Content-Encoding %q is not supported: upload uncompressed", r.Header.Get("Content-Encoding"))
			return
		}
		f, ok := put(qpath, body)
		if !ok {
			return
		}
		out = append(out, *f)
	default:
		fail(http.StatusBadRequest, "Content-Type %q: upload as multipart/form-data or application/octet-stream", r.Header.Get("Content-Type"))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// process.Process ---------------------------------------------------------

type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd,omitempty"`
}

type startRequest struct {
	Process processConfig `json:"process"`
	Pty     any           `json:"pty"`
	Tag     string        `json:"tag"`
	Stdin   bool          `json:"stdin"`
}

type selector struct {
	PID *int    `json:"pid"`
	Tag *string `json:"tag"`
}

type signalRequest struct {
	Process selector        `json:"process"`
	Signal  json.RawMessage `json:"signal"` // enum: a name or a number
}

type connectRequest struct {
	Process selector `json:"process"`
}

func processStart(w http.ResponseWriter, r *http.Request, box *sandbox.Sandbox) {
	var req startRequest
	if e := readEnvelope(r, &req); e != nil {
		streamError(w, e)
		return
	}
	if req.Pty != nil {
		streamError(w, rpcErr("unimplemented", "PTYs are not supported by rlm's sandboxes: run commands without one (commands.run)"))
		return
	}
	cwd := "."
	if req.Process.Cwd != nil {
		rel, e := toRel(*req.Process.Cwd)
		if e != nil {
			streamError(w, e)
			return
		}
		cwd = rel
	}
	pid, err := box.Start(r.Context(), sandbox.Command{Cmd: req.Process.Cmd, Args: req.Process.Args, Cwd: cwd, Env: req.Process.Envs, Tag: req.Tag})
	if err != nil {
		streamError(w, fromSandbox(err))
		return
	}
	follow(w, r, box, pid)
}

func processConnect(w http.ResponseWriter, r *http.Request, box *sandbox.Sandbox) {
	var req connectRequest
	if e := readEnvelope(r, &req); e != nil {
		streamError(w, e)
		return
	}
	pid, e := resolve(r.Context(), box, req.Process)
	if e != nil {
		streamError(w, e)
		return
	}
	follow(w, r, box, pid)
}

// follow streams command pid's events: start, its output, its end. A
// client that goes away stops the following, not the command.
func follow(w http.ResponseWriter, r *http.Request, box *sandbox.Sandbox, pid int) {
	st := newStream(w)
	if err := st.send(event(map[string]any{"start": map[string]any{"pid": pid}})); err != nil {
		return
	}
	ex, err := box.Wait(r.Context(), pid, func(stderr bool, data []byte) error {
		key := "stdout"
		if stderr {
			key = "stderr"
		}
		return st.send(event(map[string]any{"data": map[string]any{key: base64.StdEncoding.EncodeToString(data)}}))
	})
	if err != nil {
		if r.Context().Err() == nil {
			st.end(fromSandbox(err))
		}
		return
	}
	end := map[string]any{"exitCode": ex.Code, "exited": ex.Signal == "", "status": ex.Status()}
	if ex.Signal != "" {
		end["error"] = ex.Status()
	}
	if st.send(event(map[string]any{"end": end})) == nil {
		st.end(nil)
	}
}

func event(e map[string]any) map[string]any { return map[string]any{"event": e} }

// resolve finds the pid a selector names.
func resolve(ctx context.Context, box *sandbox.Sandbox, s selector) (int, *rpcError) {
	if s.PID != nil {
		return *s.PID, nil
	}
	if s.Tag != nil {
		list, err := box.Processes(ctx)
		if err != nil {
			return 0, fromSandbox(err)
		}
		for _, p := range list {
			if p.Tag == *s.Tag {
				return p.PID, nil
			}
		}
		return 0, rpcErr("not_found", "no running process tagged %q", *s.Tag)
	}
	return 0, rpcErr("invalid_argument", "process: give a pid or a tag")
}

func processList(ctx context.Context, box *sandbox.Sandbox) (any, *rpcError) {
	list, err := box.Processes(ctx)
	if err != nil {
		return nil, fromSandbox(err)
	}
	out := []map[string]any{}
	for _, p := range list {
		cfg := processConfig{Cmd: p.Cmd, Args: p.Args, Envs: p.Env}
		cwd := absPath(p.Cwd)
		cfg.Cwd = &cwd
		info := map[string]any{"config": cfg, "pid": p.PID}
		if p.Tag != "" {
			info["tag"] = p.Tag
		}
		out = append(out, info)
	}
	return map[string]any{"processes": out}, nil
}

// signals are envd's Signal enum values: by name and by number.
var signals = map[string]string{"SIGNAL_SIGKILL": "SIGKILL", "SIGNAL_SIGTERM": "SIGTERM", "9": "SIGKILL", "15": "SIGTERM"}

func sendSignal(ctx context.Context, box *sandbox.Sandbox, req *signalRequest) (any, *rpcError) {
	pid, e := resolve(ctx, box, req.Process)
	if e != nil {
		return nil, e
	}
	sig, ok := signals[strings.Trim(string(req.Signal), `"`)]
	if !ok {
		return nil, rpcErr("invalid_argument", "signal %s: envd sends SIGNAL_SIGKILL (9) or SIGNAL_SIGTERM (15)", req.Signal)
	}
	if err := box.Signal(ctx, pid, sig); err != nil {
		return nil, fromSandbox(err)
	}
	return struct{}{}, nil
}
