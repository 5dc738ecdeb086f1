// Package native is the shared body of the runtime plugins that run a local
// interpreter or toolchain (python, node, golang, shell): Info, Run and the
// requirement cache are the same for all of them, and each plugin supplies
// only what differs (the tool, the file name, the command line, an optional
// build or install step).
package native

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/install"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

// Runtime describes one local runtime.
type Runtime struct {
	Name string // "python"
	// Version is the plugin's own version, reported by Info; "" means the
	// version of the module the binary was built from: rlm's
	// (internal/version) for the built-in plugins, a third-party plugin's
	// own module version or VCS revision for it (see ownVersion), never
	// rlm's.
	Version  string
	Language string // "python"
	Ext      string // ".py"
	CodeFile string // "main.py"
	Tool     string // executable looked up on PATH: "python3"
	Probe    toolpath.Probe
	// Check, when set, reports why a found tool is still unusable
	// (for example Python older than 3.8).
	Check func(toolpath.Tool) error
	// Syntax says how the runtime checks code without running it (Check
	// RPC); nil means the runtime offers no check.
	Syntax func(t toolpath.Tool) (SyntaxCheck, error)
	// Argv is the command that runs the workspace's code; nil means the
	// tool with the code file and the program's arguments (ToolArgv), how
	// an interpreter runs a script.
	Argv func(t toolpath.Tool, ws *program.Workspace, p core.Program) []string
	// Env adds runtime-specific variables to the scrubbed base.
	Env func(t toolpath.Tool, ws *program.Workspace) []string
	// Prepare runs before the program (compile, install requirements). A
	// non-nil result ends the run with it (a compile error, say).
	Prepare func(ctx context.Context, t toolpath.Tool, ws *program.Workspace, p core.Program, env []string) (*core.Result, error)
	// Compile, when set, builds the program after Prepare, inside the
	// run's sandbox (see Build). Its report is Result.Compile; an empty
	// artifact means the build failed and ends the run (CompileResult.
	// Failed). A non-empty artifact (a binary, a class directory) is shown
	// read-only to the program's sandbox.
	Compile func(ctx context.Context, b Build) (c *core.CompileResult, artifact string, err error)
	// Spawner, when set, may return a faster way to start the program
	// than os/exec (python's fork server); nil means os/exec.
	Spawner      func(t toolpath.Tool, p core.Program) program.Spawner
	Capabilities []string
	// Installer, when set, installs a request's requirements (cached by
	// core/plugin/install) before Prepare and the program run; nil means
	// the runtime installs none (shell, golang): Info then never declares
	// the "requirements" capability, and a request with requirements is
	// refused (by the host, from that declaration, and by Run).
	Installer func(t toolpath.Tool) *install.Installer
	// InstallEnv makes the installed set in dir usable by the program
	// (PYTHONPATH, NODE_PATH); it may also prepare the workspace.
	InstallEnv func(dir string, ws *program.Workspace) []string
	// SessionLevels are the isolation levels the runtime's REPL sessions
	// enforce, for a runtime that offers them (its own Session); Info
	// declares those of them the Sandbox supports here. Programs need no
	// such list: Run enforces every level the Sandbox has.
	SessionLevels []isolation.Level
	// Sandbox runs programs at levels above none. Nil means the host's
	// sandbox supervisor (`rlm __sandbox`, see HelperSandbox), so a plugin
	// that sets nothing is sandboxed without linking the sandbox code; the
	// built-in plugins set plugins/internal/inproc's, which runs it in process
	// and keeps sandboxes warm.
	Sandbox Sandbox
}

// Server is a Runtime as core/plugin serves it (plugin.Runtime). A plugin
// with REPL sessions embeds it and adds OpenSession (plugin.Sessions).
type Server struct {
	RT *Runtime
}

// New returns the plugin runtime for rt.
func New(rt *Runtime) *Server { return &Server{RT: rt} }

// Tool resolves the runtime's executable, or says why it cannot be used.
func (s *Server) Tool() (toolpath.Tool, error) {
	t, err := toolpath.Resolve(s.RT.Tool, s.RT.Probe)
	if err != nil {
		return t, err
	}
	if s.RT.Check != nil {
		if err := s.RT.Check(t); err != nil {
			return t, err
		}
	}
	return t, nil
}

// Info reports what the runtime is and whether it can run here.
func (s *Server) Info(context.Context) (core.Info, error) {
	r := core.Info{
		Name:            s.RT.Name,
		PluginVersion:   cmp.Or(s.RT.Version, ownVersion()),
		Language:        s.RT.Language,
		FileExtension:   s.RT.Ext,
		Capabilities:    s.capabilities(),
		Backend:         "native",
		IsolationLevels: levelNames(s.sandbox().Levels()),
	}
	for _, l := range s.RT.SessionLevels {
		if s.sandbox().Available(l) == nil {
			r.SessionIsolationLevels = append(r.SessionIsolationLevels, string(l))
		}
	}
	t, err := s.Tool()
	if err != nil {
		r.UnavailableReason = err.Error()
		return r, nil
	}
	r.Available = true
	r.RuntimeVersion = t.Version
	return r, nil
}

// capabilities are the runtime's declared ones, without "requirements"
// when it has no Installer: the host refuses requirements by that
// declaration (core.CheckRequirements), so a runtime must not claim to
// install what nothing here would install.
func (s *Server) capabilities() []string {
	if s.RT.Installer != nil || !slices.Contains(s.RT.Capabilities, "requirements") {
		return s.RT.Capabilities
	}
	return slices.DeleteFunc(slices.Clone(s.RT.Capabilities), func(c string) bool { return c == "requirements" })
}

// Run executes one program in a fresh workspace.
func (s *Server) Run(ctx context.Context, req core.Program) (*core.Result, error) {
	t, err := s.Tool()
	if err != nil {
		return nil, s.unavailable(err)
	}
	// The adapter has checked the level's name (plugin.CheckRequest).
	level := req.Limits.Level()
	if err := s.sandbox().Available(level); err != nil {
		return nil, plugin.Unavailable(fmt.Errorf("isolation %s: %w", level, err))
	}
	if res, ok, err := s.runStaged(ctx, t, req, level); ok {
		return res, err
	}
	ws, err := program.NewWorkspace(req, s.RT.CodeFile)
	if err != nil {
		return nil, plugin.Invalid(err)
	}
	env := program.BaseEnv(ws.Dir)
	if s.RT.Env != nil {
		env = append(env, s.RT.Env(t, ws)...)
	}
	var ctxFile string
	if req.Context != nil {
		p, err := writeContext(req.Context)
		if err != nil {
			ws.Remove()
			return nil, err
		}
		defer os.Remove(p)
		env = append(env, "RLM_CONTEXT_FILE="+p)
		ctxFile = p
	}
	env, err = program.Environ(env, req.Env)
	if err != nil {
		ws.Remove()
		return nil, plugin.Invalid(err)
	}
	ro := []string{}
	inst, err := s.Install(ctx, t, req.Requirements, req.Install, req.Limits)
	if err != nil {
		ws.Remove()
		return nil, err
	}
	if inst != nil && inst.Failed != nil {
		ws.Remove()
		inst.Failed.InstallMs = inst.Duration.Milliseconds()
		return inst.Failed, nil
	}
	if inst != nil {
		if s.RT.InstallEnv != nil {
			env = append(env, s.RT.InstallEnv(inst.Dir, ws)...)
		}
		ro = append(ro, inst.Dir)
	}
	if s.RT.Prepare != nil {
		res, err := s.RT.Prepare(ctx, t, ws, req, env)
		if err != nil || res != nil {
			ws.Remove()
			return res, err
		}
	}
	var compiled *core.CompileResult
	if s.RT.Compile != nil {
		c, artifact, err := s.RT.Compile(ctx, Build{Tool: t, WS: ws, Program: req, Sandbox: s.sandbox(), ReadOnly: ro})
		if err != nil {
			ws.Remove()
			return nil, err
		}
		if artifact == "" {
			ws.Remove()
			return c.Failed(), nil
		}
		compiled = c
		ro = append(ro, artifact)
	}
	argv := s.argv(t, ws, req)
	var sp program.Spawner
	switch {
	case level != isolation.None:
		if filepath.IsAbs(argv[0]) && !strings.HasPrefix(argv[0], ws.Dir+"/") {
			ro = append(ro, argv[0]) // a compiled program (golang's cache)
		}
		sp = s.sandbox().Spawner(ctx, SandboxRun{
			Spec:        req.Limits.SandboxSpec(level, ReadOnlyPaths(t, append(ro, ctxFile)...)),
			Tool:        t,
			Limits:      req.Limits,
			ReturnFiles: req.ReturnFiles,
			Shared:      inst == nil && ctxFile == "",
		})
	case s.RT.Spawner != nil:
		sp = s.RT.Spawner(t, req)
	}
	res, err := program.Exec(ctx, program.Command{
		Argv:    argv,
		Dir:     ws.Dir,
		Env:     env,
		Stdin:   req.Stdin,
		Limits:  req.Limits,
		Spawner: sp,
	})
	if err != nil {
		ws.Remove()
		return nil, err
	}
	if inst != nil {
		res.InstallMs, res.InstallCached = inst.Duration.Milliseconds(), inst.Cached
	}
	res.Compile = compiled
	ws.Finish(res)
	return res, nil
}

// runStaged runs req in a workspace staged inside a warm sandbox
// (program.StagedWorkspace, Stager) when the run needs nothing of the
// host's: no input files, no context file, no requirements, no build
// step. ok false leaves the run to Run's host workspace, nothing of it
// started.
func (s *Server) runStaged(ctx context.Context, t toolpath.Tool, req core.Program, level isolation.Level) (res *core.Result, ok bool, err error) {
	st, can := s.sandbox().(Stager)
	if !can || level != isolation.Namespace || len(req.Files) > 0 || req.Context != nil ||
		len(install.Normalize(req.Requirements)) > 0 || s.RT.Prepare != nil || s.RT.Compile != nil {
		return nil, false, nil
	}
	ws := program.StagedWorkspace(req, s.RT.CodeFile, st.StagedDir())
	env := program.BaseEnv(ws.Dir)
	if s.RT.Env != nil {
		env = append(env, s.RT.Env(t, ws)...)
	}
	env, err = program.Environ(env, req.Env)
	if err != nil {
		return nil, true, plugin.Invalid(err)
	}
	sp := st.StagedSpawner(ctx, SandboxRun{
		Spec:        req.Limits.SandboxSpec(level, ReadOnlyPaths(t)),
		Tool:        t,
		Limits:      req.Limits,
		ReturnFiles: req.ReturnFiles,
		Shared:      true,
	}, ws)
	if sp == nil {
		return nil, false, nil
	}
	res, err = program.Exec(ctx, program.Command{
		Argv:    s.argv(t, ws, req),
		Dir:     ws.Dir,
		Env:     env,
		Stdin:   req.Stdin,
		Limits:  req.Limits,
		Spawner: sp,
	})
	if errors.Is(err, program.ErrNotStarted) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	ws.Finish(res)
	return res, true, nil
}

// argv is the runtime's command line for the program in ws.
func (s *Server) argv(t toolpath.Tool, ws *program.Workspace, req core.Program) []string {
	if s.RT.Argv != nil {
		return s.RT.Argv(t, ws, req)
	}
	return ToolArgv(t, ws, req)
}

// Build is what a Runtime's Compile is given: the program, its workspace
// (the compiler's working directory), and the Sandbox and read-only paths
// the program itself would run with, so untrusted source is compiled at
// the same isolation level as it runs.
type Build struct {
	Tool     toolpath.Tool
	WS       *program.Workspace
	Program  core.Program
	Sandbox  Sandbox
	ReadOnly []string
}

// Install installs reqs with the runtime's Installer for a program (Run)
// or a session (a runtime's OpenSession): nil when there are none; an
// Outcome whose Failed says why they did not install; an error (a refusal,
// plugin.Invalid) for a requirement no installer may be given or a runtime
// without an Installer.
func (s *Server) Install(ctx context.Context, t toolpath.Tool, reqs []string, opts *core.InstallOptions, limits core.Limits) (*install.Outcome, error) {
	if len(install.Normalize(reqs)) == 0 {
		return nil, nil
	}
	if s.RT.Installer == nil {
		// The host refuses these first (Info declares no requirements);
		// this holds for a host that does not.
		return nil, plugin.Invalid(fmt.Errorf("the %s runtime installs no requirements; drop them", s.RT.Name))
	}
	if err := install.Validate(reqs); err != nil {
		return nil, plugin.Invalid(err)
	}
	return s.RT.Installer(t).Ensure(ctx, reqs, installOptions(opts), limits)
}

// ToolArgv runs the code file with the tool, the program's arguments after
// it: `python3 main.py a b`.
func ToolArgv(t toolpath.Tool, ws *program.Workspace, p core.Program) []string {
	return append([]string{t.Exe, ws.CodePath}, p.Args...)
}

// installOptions is o, or the tools' defaults for nil.
func installOptions(o *core.InstallOptions) core.InstallOptions {
	if o == nil {
		return core.InstallOptions{}
	}
	return *o
}

func writeContext(c *core.Context) (string, error) {
	f, err := os.CreateTemp("", "rlm-context-")
	if err != nil {
		return "", err
	}
	defer f.Close()
	// A namespace sandbox run by root reads it as uid 65534; the directory
	// it sits in keeps other users out.
	if err := f.Chmod(0o644); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	if _, err := f.Write(c.Data); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing context: %w", err)
	}
	return f.Name(), nil
}

// SyntaxCheck says how a runtime's tool checks syntax without running
// anything.
type SyntaxCheck struct {
	// Exe is the checker; "" means the runtime's own tool.
	Exe  string
	Args []string
	// FileExt, when set, writes the code to a temporary file with this
	// extension, passed as the last argument, for checkers that read no
	// standard input (node --check).
	FileExt string
	// ShowAs names the code in messages, in place of the temporary file's
	// path or "<standard input>".
	ShowAs string
}

// Syntax is a Runtime.Syntax that needs nothing from the tool.
func Syntax(c SyntaxCheck) func(toolpath.Tool) (SyntaxCheck, error) {
	return func(toolpath.Tool) (SyntaxCheck, error) { return c, nil }
}

// Check validates code with the runtime's syntax checker (`bash -n`,
// python's compile(), `node --check`, `gofmt -e`): a non-zero exit means a
// syntax error, whose message is the checker's output.
func (s *Server) Check(ctx context.Context, code string) (ok bool, message string, err error) {
	if s.RT.Syntax == nil {
		return false, "", status.Errorf(codes.Unimplemented, "the %s runtime has no syntax check", s.RT.Name)
	}
	t, err := s.Tool()
	if err != nil {
		return false, "", s.unavailable(err)
	}
	c, err := s.RT.Syntax(t)
	if err != nil {
		return false, "", plugin.Unavailable(err)
	}
	exe := cmp.Or(c.Exe, t.Exe)
	args := c.Args
	var stdin io.Reader = strings.NewReader(code)
	name := "<standard input>"
	if c.FileExt != "" {
		f, err := os.CreateTemp("", "rlm-check-*"+c.FileExt)
		if err != nil {
			return false, "", err
		}
		defer os.Remove(f.Name())
		_, err = f.WriteString(code)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return false, "", err
		}
		args, stdin, name = append(append([]string(nil), args...), f.Name()), nil, f.Name()
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); ok {
			msg := strings.TrimSpace(string(out))
			if c.ShowAs != "" {
				msg = strings.ReplaceAll(msg, name, c.ShowAs)
			}
			return false, msg, nil
		}
		return false, "", err
	}
	return true, "", nil
}

// unavailable is the refusal for a runtime whose tool cannot be used here.
func (s *Server) unavailable(err error) error {
	return plugin.Unavailable(fmt.Errorf("%s runtime unavailable: %w", s.RT.Name, err))
}

func levelNames(levels []isolation.Level) []string {
	out := make([]string, len(levels))
	for i, l := range levels {
		out[i] = string(l)
	}
	return out
}
