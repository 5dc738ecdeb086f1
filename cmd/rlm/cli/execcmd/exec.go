// Package execcmd implements `rlm exec`: run a snippet or file in a runtime
// and exit with the program's own status.
package execcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/cmd/rlm/cli/modelflags"
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/install"
)

// Options are exec's parsed flags.
type Options struct {
	F *cmdutil.Factory

	Runtime   string
	Backend   string
	Code      string
	CodeSet   bool
	File      string
	Timeout   time.Duration
	MaxOutput string
	Limits    cmdutil.LimitFlags
	Fuel      int64
	Context   string
	Check     bool
	JSON      bool
	Stdin     string
	Args      []string
	Env       []string
	Files     []string
	Out       string
	Changed   func(name string) bool

	Requirements   []string
	IndexURL       string
	FindLinks      []string
	NoIndex        bool
	NpmRegistry    string
	InstallTimeout time.Duration

	// Model gives the --context cell's llm_query a model (model.go).
	Model   modelflags.SessionFlags
	bridges core.Bridges
}

// NewCmd builds the command; runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "exec [flags] (-c CODE | FILE | -)",
		Short: "Run a snippet or a file in a runtime and print its output",
		Long: `Run code in a runtime (python, node, golang, shell, or a third-party plugin).

The runtime is -r, else the one the file's extension names (.py python,
.js/.mjs/.cjs node, .go golang, .sh shell, or the extension a discovered
plugin declares), else the config's (python) for code without a file
extension. An extension no runtime declares is a usage error.
Standard input, when piped or redirected, reaches the program (as does
--stdin FILE, or --stdin - explicitly).

Exit status:
  N    the program's own status (128+N when signal N killed it)
  2    usage error
  124  the --timeout ran out
  125  out of fuel (--fuel, pyodide)
  126  the --requirements could not be installed
  127  the runtime is missing or unavailable on this machine
  130  interrupted (Ctrl-C, SIGTERM)

A program that prints more than 64 times --max-output (64 MiB at the
default, never less) on stdout or stderr is killed (ended_by output_limit): --max-output bounds what is kept, this bounds
what is read.`,
		Example: `  rlm exec -c 'print(40+2)'
  rlm exec -r shell -c 'echo hi; exit 3'
  echo 'console.log(1)' | rlm exec -r node -
  echo data | rlm exec -c 'import sys; print(sys.stdin.read())'
  rlm exec --json --timeout 2s script.py`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.CodeSet = cmd.Flags().Changed("code")
			o.Changed = cmd.Flags().Changed
			if len(args) == 1 {
				o.File = args[0]
			}
			if o.CodeSet == (o.File != "") {
				return cmdutil.Usagef("give the code with -c CODE, a FILE, or - for stdin (exactly one)")
			}
			if runF != nil {
				return runF(o)
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Runtime, "runtime", "r", "", "runtime: python, node, golang, shell or a plugin's name (default from config: python)")
	fl.StringVarP(&o.Backend, "backend", "b", "", "backend: auto, daemon, native or pyodide (default from config: auto)")
	fl.StringVarP(&o.Code, "code", "c", "", "code to run")
	fl.DurationVar(&o.Timeout, "timeout", 0, "wall-clock limit, e.g. 10s (default from config: 30s)")
	o.Limits.Register(fl)
	fl.Int64Var(&o.Fuel, "fuel", 0, "CPU budget in fuel units (pyodide backend; 0: its default, -1: unlimited)")
	fl.StringVar(&o.MaxOutput, "max-output", "", "bytes of stdout and of stderr to keep, head and tail (e.g. 1000, 64KiB; default 1MiB)")
	fl.StringVar(&o.Context, "context", "", "file whose content becomes the `context` variable (python) or $RLM_CONTEXT_FILE")
	fl.BoolVar(&o.Check, "check", false, "only check the syntax; run nothing")
	fl.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	fl.StringVar(&o.Stdin, "stdin", "", "file to give the program as standard input (- for rlm's own; piped input is passed by default)")
	fl.StringArrayVar(&o.Args, "arg", nil, "argument for the program (repeatable)")
	fl.StringArrayVar(&o.Env, "env", nil, "K=V environment variable for the program (repeatable)")
	fl.StringArrayVar(&o.Files, "file", nil, "NAME=PATH: put the file at PATH into the working directory as NAME (repeatable)")
	fl.StringVar(&o.Out, "out", "", "directory to write the files the program produced into")
	fl.StringSliceVar(&o.Requirements, "requirements", nil, "packages to install first, comma-separated or repeated (pip for python, npm for node; refused by runtimes that install none, such as shell and golang); local paths are allowed")
	fl.StringVar(&o.IndexURL, "index-url", "", "python: package index URL for requirements")
	fl.StringArrayVar(&o.FindLinks, "find-links", nil, "python: directory or URL of wheels to install requirements from (repeatable)")
	fl.BoolVar(&o.NoIndex, "no-index", false, "python: install requirements from --find-links only, never an index")
	fl.StringVar(&o.NpmRegistry, "npm-registry", "", "node: npm registry URL for requirements")
	o.Model.Register(fl)
	fl.DurationVar(&o.InstallTimeout, "install-timeout", 0, "limit for installing requirements (python, node) or compiling (golang), separate from --timeout (default 5m)")
	cmdutil.CompleteValues(cmd, "runtime", cmdutil.BuiltinRuntimes...)
	cmdutil.CompleteValues(cmd, "backend", client.Valid...)
	cmdutil.CompleteValues(cmd, "isolation", "auto", "none", "process", "namespace")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	cfg, _, err := o.F.Config()
	if err != nil {
		return err
	}
	prog, err := o.program(cfg)
	if err != nil {
		return cmdutil.Usage(err)
	}
	if err := o.resolveModel(cfg); err != nil {
		return cmdutil.Usage(err)
	}
	if o.Runtime == "" {
		if o.Runtime, err = o.runtimeByExtension(ctx); err != nil {
			return err
		}
	}
	if o.Runtime == "" {
		o.Runtime = cfg.Runtime
	}
	if o.Out != "" {
		if st, err := os.Stat(o.Out); err == nil && !st.IsDir() {
			return cmdutil.Usagef("--out %s is a file; give a directory (made when missing) for the produced files", o.Out)
		}
	}
	if o.Backend == "" {
		o.Backend = cfg.Backend
	}
	if err := client.Check(o.Backend); err != nil {
		return cmdutil.Usage(err)
	}
	rt, err := client.Open(ctx, o.Runtime, o.F.BackendOptions(o.Backend))
	if err != nil {
		if u := cmdutil.UnknownRuntime(err, "runtime"); u != nil {
			return u
		}
		if cmdutil.Refused(err) {
			return cmdutil.Usage(err)
		}
		// Not found, or a plugin that crashed, hung or broke its handshake
		// (`rlm plugins` lists it unavailable), or an unreachable daemon.
		return jsonFailure(o, &cmdutil.ExitError{Code: cmdutil.ExitNoRuntime, Err: err})
	}
	defer rt.Close()
	err = runOn(ctx, rt, o, prog)
	if cmdutil.Refused(err) {
		// rlm's own refusal (a level or limit the plugin cannot hold, a
		// clashing file) must not exit 1 like the program's own failure.
		return cmdutil.Usage(err)
	}
	return jsonFailure(o, err)
}

// jsonFailure prints, for --json, the error that ended exec before there
// was a result (a runtime that is missing, whose plugin failed to start or
// died answering), so that a caller reading stdout gets an object that
// says why, as with a result: {"runtime", "error"}. Usage errors and
// interruptions print nothing there; the error is on stderr as always.
func jsonFailure(o *Options, err error) error {
	var ee *cmdutil.ExitError
	if !o.JSON || err == nil || errors.As(err, &ee) && (ee.Err == nil || ee.Code == cmdutil.ExitUsage || ee.Code == cmdutil.ExitInterrupted) {
		return err
	}
	msg := err.Error()
	if ee != nil {
		msg = ee.Err.Error()
	}
	_ = writeJSON(o.F.IO.Out, map[string]string{"runtime": o.Runtime, "error": msg})
	return err
}

// runOn runs prog (or checks it) on rt and reports the result. Its errors
// are mapped to exit codes by run.
func runOn(ctx context.Context, rt *client.Runtime, o *Options, prog core.Program) error {
	if err := ready(ctx, rt, o, prog); err != nil {
		return err
	}

	if o.Check {
		ok, msg, err := rt.Check(ctx, prog.Code)
		if err != nil {
			return err
		}
		if o.JSON {
			if err := writeJSON(o.F.IO.Out, map[string]any{"ok": ok, "message": msg}); err != nil || ok {
				return err
			}
			return cmdutil.Exit(cmdutil.ExitFailure)
		}
		if !ok {
			fmt.Fprintln(o.F.IO.ErrOut, msg)
			return cmdutil.Exit(cmdutil.ExitFailure)
		}
		fmt.Fprintln(o.F.IO.Out, "ok")
		return nil
	}

	// A python program with a context runs as a REPL cell, which has no
	// argv, stdin or working-directory files: refuse what would be lost.
	if prog.Context != nil && rt.Name == "python" && (len(prog.Args) > 0 || prog.Stdin != nil || len(prog.Files) > 0 || o.Out != "") {
		return cmdutil.Usagef("--context on python runs the code as a REPL cell, which takes no --arg, --stdin, --file or --out; drop them, or give the context as --file NAME=PATH and read that file instead")
	}
	warnUnsandboxed(ctx, rt, o, prog)
	res, err := execute(ctx, rt, prog, o.bridges)
	if ctx.Err() != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitInterrupted, Err: errors.New("interrupted")}
	}
	if errors.Is(err, core.ErrRuntimeLost) && rt.Exited() {
		// The plugin died under the call before it said it had the
		// request (a plugin without rlm's SDK, or one killed at once):
		// the program may have started all the same, and exec never
		// runs it again, so this is the run's ending, not rlm's failure.
		res, err = &core.Result{EndedBy: ending.Crashed, ExitCode: -1, Backend: rt.Backend,
			Error: fmt.Sprintf("the %s runtime's plugin exited during the run: %v; %s", rt.Name, err, core.PartlyRun)}, nil
	}
	if err != nil {
		return err
	}
	if res.Backend == "" {
		res.Backend = rt.Backend
	}
	cmdutil.AddHint(res)
	if o.Out != "" {
		if err := writeOut(o.Out, res.Files); err != nil {
			return err
		}
		if res.FilesOmitted {
			fmt.Fprintf(o.F.IO.ErrOut, "rlm: --out: %d files written to %s; others were left out (at most 100 files, each at most 10 MiB)\n", len(res.Files), o.Out)
		}
	}
	if o.JSON {
		if err := writeJSON(o.F.IO.Out, struct {
			Runtime string `json:"runtime"`
			*core.Result
		}{o.Runtime, res}); err != nil {
			return err
		}
	} else {
		io.WriteString(o.F.IO.Out, res.Stdout)
		io.WriteString(o.F.IO.ErrOut, res.Stderr)
		if res.EndedBy != ending.Exit && res.Error != "" {
			fmt.Fprintf(o.F.IO.ErrOut, "rlm: %s\n", res.Error)
		}
	}
	return cmdutil.Exit(ExitCode(res))
}

// execute runs the program; with a context on python it runs as one REPL
// cell so that `context` is a real variable.
func execute(ctx context.Context, rt *client.Runtime, p core.Program, bridges core.Bridges) (*core.Result, error) {
	if p.Context == nil || rt.Name != "python" {
		return rt.Run(ctx, p)
	}

	if len(p.Requirements) > 0 {
		return nil, cmdutil.Usagef("--requirements cannot be combined with --context for python yet (the context runs in a REPL session); pass the context as a file with --file instead")
	}
	s, err := rt.OpenSession(ctx, core.SessionOptions{Context: p.Context, Limits: p.Limits, Env: p.Env, Bridges: bridges})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res, err := s.Execute(ctx, p.Code, p.Limits.Wall)
	if res != nil {
		res.Value = nil // a program runs as a script: no final value
	}
	return res, err
}

// ExitCode maps a result to rlm exec's exit status.
func ExitCode(r *core.Result) int {
	if r.TimedOut {
		return cmdutil.ExitTimeout
	}
	switch r.EndedBy {
	case ending.Fuel:
		return cmdutil.ExitFuel
	case ending.InstallFailed:
		return cmdutil.ExitInstall
	case ending.Cancelled:
		return cmdutil.ExitInterrupted
	}
	if r.ExitCode < 0 {
		return cmdutil.ExitFailure
	}
	return r.ExitCode
}

func (o *Options) program(cfg config.Config) (core.Program, error) {
	p := core.Program{Args: o.Args, ReturnFiles: o.JSON || o.Out != ""}
	switch {
	case o.CodeSet:
		p.Code = o.Code
	case o.File == "-":
		if o.Stdin == "-" {
			return p, fmt.Errorf("--stdin - and code from - both want standard input; give the code with -c or a FILE")
		}
		b, err := io.ReadAll(o.F.IO.In)
		if err != nil {
			return p, fmt.Errorf("reading code from stdin: %w", err)
		}
		p.Code = string(b)
	default:
		b, err := os.ReadFile(o.File)
		if err != nil {
			return p, fmt.Errorf("cannot read code file: %w", err)
		}
		p.Code = string(b)
	}
	p.Limits.Wall = time.Duration(cfg.Limits.Timeout)
	if o.Timeout > 0 {
		p.Limits.Wall = o.Timeout
	} else if o.Changed != nil && o.Changed("timeout") {
		return p, fmt.Errorf("--timeout must be positive")
	}
	p.Limits.MaxOutputBytes = int64(cfg.Limits.MaxOutput)
	if o.Fuel < -1 {
		return p, fmt.Errorf("--fuel %d: give a budget in fuel units, 0 for the backend's default or -1 for unlimited", o.Fuel)
	}
	p.Limits.Fuel = o.Fuel
	if err := o.Limits.Apply(cfg.Limits, &p.Limits); err != nil {
		return p, err
	}
	if o.MaxOutput != "" {
		n, err := config.ParseSize(o.MaxOutput)
		if err != nil || n <= 0 {
			return p, fmt.Errorf("--max-output: %q is not a positive size", o.MaxOutput)
		}
		p.Limits.MaxOutputBytes = n
	}
	if o.InstallTimeout > 0 {
		p.Limits.InstallTimeout = o.InstallTimeout
	} else if o.Changed != nil && o.Changed("install-timeout") {
		return p, fmt.Errorf("--install-timeout must be positive")
	}
	if err := o.requirements(&p); err != nil {
		return p, err
	}
	if o.Context != "" {
		b, err := os.ReadFile(o.Context)
		if err != nil {
			return p, fmt.Errorf("cannot read --context file: %w", err)
		}
		p.Context = &core.Context{Data: b, Kind: "text"}
	}
	switch {
	case o.Stdin == "-" || o.Stdin == "" && o.File != "-" && o.Context == "" && o.F.IO.InPiped:
		b, err := io.ReadAll(o.F.IO.In)
		if err != nil {
			return p, fmt.Errorf("reading standard input: %w", err)
		}
		p.Stdin = b
	case o.Stdin != "":
		b, err := os.ReadFile(o.Stdin)
		if err != nil {
			return p, fmt.Errorf("cannot read --stdin file: %w", err)
		}
		p.Stdin = b
	}
	for _, kv := range o.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return p, fmt.Errorf("--env %q: want K=V", kv)
		}
		// Refused here, as a usage error naming the flag, by the same
		// check every runtime applies (a name the sandbox's shell would
		// drop, a value no program can receive).
		var ee *core.EnvError
		if errors.As(core.CheckEnv(map[string]string{k: v}), &ee) {
			return p, fmt.Errorf("--env %q: %s", kv, ee.Reason)
		}
		if p.Env == nil {
			p.Env = map[string]string{}
		}
		p.Env[k] = v
	}
	for _, nv := range o.Files {
		name, path, ok := strings.Cut(nv, "=")
		if !ok || name == "" || path == "" {
			return p, fmt.Errorf("--file %q: want NAME=PATH", nv)
		}
		if _, err := core.CleanName(name); err != nil {
			return p, fmt.Errorf("--file: %w", err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return p, fmt.Errorf("--file %s: %w", name, err)
		}
		p.Files = append(p.Files, core.File{Path: name, Data: b})
	}
	return p, nil
}

// requirements fills the program's requirements and install options. The
// installer runs in a directory of its own, so local paths (a wheel, a
// tarball, a --find-links directory) are made absolute here.
func (o *Options) requirements(p *core.Program) error {
	for _, r := range o.Requirements {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if looksLocal(r) {
			abs, err := filepath.Abs(r)
			if err != nil {
				return fmt.Errorf("--requirements %s: %w", r, err)
			}
			if _, err := os.Stat(abs); err != nil {
				return fmt.Errorf("--requirements: local package %s not found", r)
			}
			r = abs
		}
		p.Requirements = append(p.Requirements, r)
	}
	if err := install.Validate(p.Requirements); err != nil {
		return fmt.Errorf("--requirements: %w", err)
	}
	if o.IndexURL == "" && len(o.FindLinks) == 0 && !o.NoIndex && o.NpmRegistry == "" {
		return nil
	}
	in := &core.InstallOptions{IndexURL: o.IndexURL, NoIndex: o.NoIndex, NPMRegistry: o.NpmRegistry}
	for _, l := range o.FindLinks {
		if !strings.Contains(l, "://") {
			abs, err := filepath.Abs(l)
			if err != nil {
				return fmt.Errorf("--find-links %s: %w", l, err)
			}
			if _, err := os.Stat(abs); err != nil {
				return fmt.Errorf("--find-links: %s not found; give a directory of wheels or a URL", l)
			}
			l = abs
		}
		in.FindLinks = append(in.FindLinks, l)
	}
	if o.NoIndex && len(in.FindLinks) == 0 {
		return fmt.Errorf("--no-index needs --find-links DIR: otherwise there is nowhere to install from")
	}
	p.Install = in
	return nil
}

// extRuntimes maps a code file's extension to the runtime that runs it,
// so that `rlm exec hi.js` does not run JavaScript as Python.
var extRuntimes = map[string]string{
	".py": "python", ".js": "node", ".mjs": "node", ".cjs": "node",
	".go": "golang", ".sh": "shell", ".bash": "shell",
	".c": "c", ".cpp": "cpp", ".cc": "cpp", ".java": "java", ".rs": "rust",
}

// ready checks, before anything runs, what would otherwise surface as the
// plugin's failure (exit 1, like the program's own): a runtime that is
// unavailable here or whose plugin does not answer (127; a usage error for
// the pyodide backend, which is chosen, not found) and a --file clashing
// with the code file (2).
func ready(ctx context.Context, rt *client.Runtime, o *Options, p core.Program) error {
	info, err := rt.Declared(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // Run reports the interruption
		}
		return &cmdutil.ExitError{Code: cmdutil.ExitNoRuntime, Err: fmt.Errorf("runtime %s is not available here: its plugin did not answer: %w", o.Runtime, err)}
	}
	if !info.Available {
		err := fmt.Errorf("runtime %s is not available here: %s", o.Runtime, info.UnavailableReason)
		if rt.Backend == client.Pyodide {
			return cmdutil.Usage(err)
		}
		return &cmdutil.ExitError{Code: cmdutil.ExitNoRuntime, Err: err}
	}
	if ext := info.FileExtension; ext != "" {
		code := "main" + ext
		if !strings.HasPrefix(ext, ".") {
			code = "main." + ext
		}
		for _, f := range p.Files {
			if name, _ := core.CleanName(f.Path); name == code {
				return cmdutil.Usagef("--file %s clashes with the code file, which %s writes as %s; give it another name", f.Path, o.Runtime, code)
			}
		}
	}
	return nil
}

// looksLocal reports whether a requirement names a file rather than a
// package: a path prefix, or an existing archive.
func looksLocal(r string) bool {
	if strings.HasPrefix(r, "./") || strings.HasPrefix(r, "../") || strings.HasPrefix(r, "/") {
		return true
	}
	for _, ext := range []string{".whl", ".tgz", ".tar.gz", ".zip"} {
		if strings.HasSuffix(r, ext) {
			if _, err := os.Stat(r); err == nil {
				return true
			}
		}
	}
	return false
}

func writeOut(dir string, files []core.File) error {
	for _, f := range files {
		name, err := core.CleanName(f.Path)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
