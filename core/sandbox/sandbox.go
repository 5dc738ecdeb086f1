// Package sandbox makes a REPL session a sandbox: one isolated workspace
// where the session's Python cells, shell commands and file operations
// meet (DESIGN.md, "Front ends over one core"). rlm serve's session
// endpoints and its E2B front end are translations onto this one type.
//
// # Notes
//
//   - Nothing here starts a process on the host. Every command and every
//     file operation is a cell of the session's own interpreter, running a
//     small helper (agent.py) installed into it on first use: a command is
//     a child of that interpreter, so it lives in the same namespaces,
//     cgroup, seccomp filter and user as the REPL, with its memory,
//     process and disk limits, and sees the same working directory. A
//     second sandbox's commands cannot see the first's files or processes:
//     they are separate sandboxes with separate pid and mount namespaces.
//   - The price is that cells, commands' polls and file operations of one
//     sandbox take turns (a REPL runs one cell at a time): a command's
//     output arrives in polls between cells, and a long cell delays them.
//     A command runs on while a cell runs; only its reporting waits.
//   - Paths are relative to the workspace (the interpreter's working
//     directory, which is also $HOME for commands). ".." and absolute
//     paths are refused here; a symlink that leads out is refused inside.
//   - Command output is spooled to a private directory outside the
//     workspace and read back in slices, so output of any size streams
//     without holding it in one cell's capture.
package sandbox

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlmkit/rlm/core"
)

//go:embed agent.py
var agentSource string

// mark starts the one line each helper cell prints (agent.py's MARK).
const mark = "\x1erlm-sandbox "

// RunFunc runs one cell in the sandbox's REPL, in turn with the user's
// cells (the caller holds the session's cell lock while it runs).
type RunFunc func(ctx context.Context, c core.Cell) (*core.Result, error)

// Sandbox is one session seen as a sandbox. Its methods may be called
// concurrently; each is one or more cells of the session.
type Sandbox struct {
	run RunFunc

	mu        sync.Mutex
	installed bool
	procs     map[int]*proc
}

// proc is what the host knows of a command it started: how much of its
// output it has passed on.
type proc struct {
	outOff, errOff int64
	followed       bool
}

// New makes a sandbox of the session run drives.
func New(run RunFunc) *Sandbox {
	return &Sandbox{run: run, procs: map[int]*proc{}}
}

// Kind classifies an Error.
type Kind string

// The kinds of Error, from what the helper met inside the sandbox.
const (
	NotFound   Kind = "not_found"
	Exists     Kind = "exists"
	Invalid    Kind = "invalid"
	Outside    Kind = "outside"
	NoProcess  Kind = "no_process"
	Permission Kind = "permission"
	OS         Kind = "os"
	// Failed: the helper's cell itself failed (the session's interpreter
	// ended, the cell timed out); Message says how.
	Failed Kind = "failed"
)

// Error is an operation the sandbox refused or could not do.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrorKind is the Kind of err when it is an *Error, else "".
func ErrorKind(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// call runs op in the helper, decoding its answer into out (nil: ignore).
func (s *Sandbox) call(ctx context.Context, op string, args map[string]any, out any) error {
	req := map[string]any{"op": op}
	for k, v := range args {
		req[k] = v
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	lit, _ := json.Marshal(string(body)) // a JSON string is a Python string literal
	return s.helperCell(ctx, "__rlm_sandbox.call("+string(lit)+")", nil, out)
}

// helperCell runs code (which uses __rlm_sandbox) with files, installing
// the helper first when the session has none yet (a new session, or one
// whose interpreter was restarted), and decodes the helper's answer.
func (s *Sandbox) helperCell(ctx context.Context, code string, files []core.File, out any) error {
	s.mu.Lock()
	installed := s.installed
	s.mu.Unlock()
	if !installed {
		code = installCode() + code
	}
	res, err := s.run(ctx, core.Cell{Code: code, Files: files})
	if err != nil {
		return err
	}
	if installed && res.ExitCode != 0 && strings.Contains(res.Error, "__rlm_sandbox") {
		// the interpreter was restarted since (a cell's timeout): its
		// helper is gone with its state
		res, err = s.run(ctx, core.Cell{Code: installCode() + code})
		if err != nil {
			return err
		}
	}
	if res.ExitCode == 0 {
		s.mu.Lock()
		s.installed = true
		s.mu.Unlock()
	}
	return decode(res, out)
}

// installCode defines __rlm_sandbox in the session's namespace, keeping
// agent.py's own names out of it.
func installCode() string {
	src, _ := json.Marshal(agentSource)
	return "__rlm_sandbox = (lambda g: (exec(compile(" + string(src) + ", '<rlm sandbox>', 'exec'), g), " +
		"g['_RlmSandbox'](globals()))[1])({'__builtins__': __builtins__})\n"
}

// decode reads the helper's answer line from a cell's stdout.
func decode(res *core.Result, out any) error {
	if res.StdoutOmitted > 0 {
		return &Error{Kind: Failed, Message: fmt.Sprintf("the sandbox's helper answered more than the server keeps of a cell's output (%d bytes cut): raise the output limit (rlm serve --max-output) to at least 1MiB", res.StdoutOmitted)}
	}
	i := strings.LastIndex(res.Stdout, mark)
	if i < 0 {
		why := res.Error
		if why == "" {
			why = fmt.Sprintf("it ended by %s with exit code %d", res.EndedBy, res.ExitCode)
		}
		return &Error{Kind: Failed, Message: "the sandbox's helper gave no answer: " + why}
	}
	line := res.Stdout[i+len(mark):]
	if j := strings.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	var resp struct {
		OK    json.RawMessage `json:"ok"`
		Error *struct {
			Kind    Kind   `json:"kind"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &resp); err != nil {
		return &Error{Kind: Failed, Message: "the sandbox's helper answered garbage: " + err.Error()}
	}
	if resp.Error != nil {
		return &Error{Kind: resp.Error.Kind, Message: resp.Error.Message}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(resp.OK, out)
}

// Clean checks a workspace path from a client: "" and "." name the
// workspace itself; anything else must pass core.CleanName (relative,
// no "..").
func Clean(p string) (string, error) {
	if p == "" || p == "." || p == "./" {
		return ".", nil
	}
	c, err := core.CleanName(strings.TrimSuffix(p, "/"))
	if err != nil {
		return "", &Error{Kind: Invalid, Message: strings.Replace(err.Error(), "file name", "path", 1)}
	}
	return c, nil
}

// Command is one command to run inside the sandbox.
type Command struct {
	// Cmd is the program and Args its arguments (no shell unless Cmd is
	// one: E2B's SDKs send /bin/bash -l -c LINE).
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Cwd  string            `json:"cwd"`  // relative to the workspace; "" is the workspace
	Env  map[string]string `json:"envs"` // added to the sandbox's environment
	Tag  string            `json:"tag"`
}

// ProcessInfo is a running command.
type ProcessInfo struct {
	PID int `json:"pid"`
	Command
}

// Start starts c in the background and returns its pid (the sandbox's
// own pid: the number its commands see).
func (s *Sandbox) Start(ctx context.Context, c Command) (int, error) {
	cwd, err := Clean(c.Cwd)
	if err != nil {
		return 0, err
	}
	if c.Cmd == "" {
		return 0, &Error{Kind: Invalid, Message: "the command is empty: give the program to run"}
	}
	var out struct {
		PID int `json:"pid"`
	}
	args := c.Args
	if args == nil {
		args = []string{}
	}
	if err := s.call(ctx, "start", map[string]any{"cmd": c.Cmd, "args": args, "cwd": cwd, "envs": c.Env, "tag": c.Tag}, &out); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.procs[out.PID] = &proc{}
	s.mu.Unlock()
	return out.PID, nil
}

// Exit is how a command ended.
type Exit struct {
	// Code is the exit status; -1 when a signal ended it.
	Code int `json:"exit_code"`
	// Signal is the signal that ended it (SIGKILL), if one did.
	Signal string `json:"signal,omitempty"`
}

// Status says how it ended as Go's os.ProcessState does ("exit status 1",
// "signal: killed"), the form E2B's envd reports.
func (e Exit) Status() string {
	if e.Signal != "" {
		return "signal: " + e.Signal
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// pollLimit is the most output of each stream one poll reads: both
// streams' worth in base64 stays well inside the 1 MiB a cell's output
// keeps by default.
const pollLimit = 192 << 10

// Wait follows command pid until it exits, giving its output to onOutput
// as it comes (stderr false: stdout), and returns how it ended. Only one
// Wait may follow a command; its output is passed on once.
func (s *Sandbox) Wait(ctx context.Context, pid int, onOutput func(stderr bool, data []byte) error) (Exit, error) {
	s.mu.Lock()
	p := s.procs[pid]
	if p != nil && p.followed {
		p = nil
	}
	if p != nil {
		p.followed = true
	}
	s.mu.Unlock()
	if p == nil {
		return Exit{}, &Error{Kind: NoProcess, Message: fmt.Sprintf("no command %d to follow in this sandbox: it was not started here, or another request follows it", pid)}
	}
	defer func() {
		s.mu.Lock()
		p.followed = false
		s.mu.Unlock()
	}()
	delay := time.Millisecond
	for {
		var r struct {
			Out      string `json:"out"`
			Err      string `json:"err"`
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exit_code"`
		}
		if err := s.call(ctx, "poll", map[string]any{"pid": pid, "out_off": p.outOff, "err_off": p.errOff, "limit": pollLimit}, &r); err != nil {
			return Exit{}, err
		}
		got := false
		for _, c := range []struct {
			data   string
			off    *int64
			stderr bool
		}{{r.Out, &p.outOff, false}, {r.Err, &p.errOff, true}} {
			b, err := base64.StdEncoding.DecodeString(c.data)
			if err != nil {
				return Exit{}, err
			}
			if len(b) > 0 {
				got = true
				*c.off += int64(len(b))
				if err := onOutput(c.stderr, b); err != nil {
					return Exit{}, err
				}
			}
		}
		if r.Exited {
			_ = s.call(context.WithoutCancel(ctx), "forget", map[string]any{"pid": pid}, nil)
			s.mu.Lock()
			delete(s.procs, pid)
			s.mu.Unlock()
			ex := Exit{Code: r.ExitCode}
			if r.ExitCode < 0 {
				ex = Exit{Code: -1, Signal: signalName(syscall.Signal(-r.ExitCode))}
			}
			return ex, nil
		}
		if got {
			delay = time.Millisecond
			continue
		}
		select {
		case <-ctx.Done():
			return Exit{}, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// signalName is a signal's name as Go's os.ProcessState prints it
// ("killed", "terminated"), which E2B's status strings use.
func signalName(sig syscall.Signal) string { return sig.String() }

// Signal sends sig (a name from ParseSignal) to command pid and
// everything it started. Signals travel by name: the helper resolves
// the number on the sandbox's own system.
func (s *Sandbox) Signal(ctx context.Context, pid int, sig string) error {
	return s.call(ctx, "signal", map[string]any{"pid": pid, "sig": sig}, nil)
}

// signals are the signals a client may send a command, by name.
var signals = []string{"SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCONT", "SIGSTOP"}

// ParseSignal reads a signal a client names ("SIGTERM", "term", "15");
// "" is SIGKILL. It gives the canonical name, or a number as given.
func ParseSignal(v string) (string, bool) {
	if v == "" {
		return "SIGKILL", true
	}
	if n, err := strconv.Atoi(v); err == nil {
		return v, n > 0 && n < 65
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	return name, slices.Contains(signals, name)
}

// Processes lists the commands running now.
func (s *Sandbox) Processes(ctx context.Context) ([]ProcessInfo, error) {
	var out []ProcessInfo
	err := s.call(ctx, "list", nil, &out)
	return out, err
}

// Entry is a file, directory or symlink of the workspace.
type Entry struct {
	Name   string  `json:"name"`
	Path   string  `json:"path"` // relative to the workspace
	Type   string  `json:"type"` // file, dir or symlink
	Size   int64   `json:"size"`
	Mode   uint32  `json:"mode"`
	Mtime  float64 `json:"mtime"` // seconds since the epoch
	Target string  `json:"target,omitempty"`
}

// Stat describes path.
func (s *Sandbox) Stat(ctx context.Context, path string) (Entry, error) {
	var e Entry
	p, err := Clean(path)
	if err != nil {
		return e, err
	}
	err = s.call(ctx, "stat", map[string]any{"path": p}, &e)
	return e, err
}

// List lists directory path, and depth-1 levels below it.
func (s *Sandbox) List(ctx context.Context, path string, depth int) ([]Entry, error) {
	p, err := Clean(path)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	err = s.call(ctx, "listdir", map[string]any{"path": p, "depth": max(depth, 1)}, &out)
	return out, err
}

// MakeDir creates directory path and its parents; false when it was there.
func (s *Sandbox) MakeDir(ctx context.Context, path string) (bool, error) {
	p, err := Clean(path)
	if err != nil {
		return false, err
	}
	var made bool
	err = s.call(ctx, "mkdir", map[string]any{"path": p}, &made)
	return made, err
}

// Remove removes path, a directory with all it holds.
func (s *Sandbox) Remove(ctx context.Context, path string) error {
	p, err := Clean(path)
	if err != nil {
		return err
	}
	return s.call(ctx, "remove", map[string]any{"path": p}, nil)
}

// Move renames src to dst, creating dst's parents.
func (s *Sandbox) Move(ctx context.Context, src, dst string) (Entry, error) {
	var e Entry
	a, err := Clean(src)
	if err != nil {
		return e, err
	}
	b, err := Clean(dst)
	if err != nil {
		return e, err
	}
	err = s.call(ctx, "move", map[string]any{"src": a, "dst": b}, &e)
	return e, err
}

// readChunk is the most of a file one cell reads (its base64 stays well
// inside the 1 MiB a cell's output keeps by default).
const readChunk = 512 << 10

// ReadFile reads file path, refusing one over limit bytes.
func (s *Sandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	p, err := Clean(path)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for {
		var r struct {
			Data string `json:"data"`
			Size int64  `json:"size"`
		}
		if err := s.call(ctx, "read", map[string]any{"path": p, "off": buf.Len(), "limit": readChunk}, &r); err != nil {
			return nil, err
		}
		if r.Size > limit {
			return nil, &Error{Kind: Invalid, Message: fmt.Sprintf("file %s is %d bytes, over the %d bytes a read may return", p, r.Size, limit)}
		}
		b, err := base64.StdEncoding.DecodeString(r.Data)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
		if len(b) < readChunk {
			return buf.Bytes(), nil
		}
	}
}

// WriteFile writes data to file path (creating its parents, replacing a
// file there) the way a session cell's files are written, and describes
// the file written.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte) (Entry, error) {
	var e Entry
	p, err := Clean(path)
	if err != nil {
		return e, err
	}
	if p == "." {
		return e, &Error{Kind: Invalid, Message: "the path names the workspace itself: name a file in it"}
	}
	req, _ := json.Marshal(map[string]any{"op": "stat", "path": p})
	lit, _ := json.Marshal(string(req))
	err = s.helperCell(ctx, "__rlm_sandbox.call("+string(lit)+")", []core.File{{Path: p, Data: data}}, &e)
	return e, err
}

// NewContext makes a fresh namespace for cells, beside the session's own
// (E2B's code contexts): its globals are its own; files and commands are
// the sandbox's.
func (s *Sandbox) NewContext(ctx context.Context) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := s.call(ctx, "context", nil, &out)
	return out.ID, err
}

// ContextCell is the code of a session cell that runs code as a cell of
// context id: its output, error and final expression's value are the
// session cell's. The helper must be installed (NewContext did it).
func ContextCell(id, code string) string {
	i, _ := json.Marshal(id)
	c, _ := json.Marshal(code)
	return "__rlm_sandbox.run_in(" + string(i) + ", " + string(c) + ")"
}
