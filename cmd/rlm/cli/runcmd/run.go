// Package runcmd implements `rlm run`: answer a task about a (possibly
// huge) context with a Recursive Language Model loop.
package runcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
	"github.com/rlmkit/rlm/core/traceview"
)

// Exit codes of rlm run (0 and 2 are shared by every command).
const (
	ExitBudget      = 3   // a budget ran out before an answer was found
	ExitProvider    = 4   // a model call failed (after retries)
	ExitSandbox     = 5   // the REPL could not be started or died
	ExitInterrupted = 130 // interrupted (Ctrl-C, SIGTERM)
)

// DefaultModels are the models used when none is configured.
var DefaultModels = modelflags.DefaultModels

// Options are run's parsed flags.
type Options struct {
	F *cmdutil.Factory

	TaskFile      string
	Task          string
	Context       string
	Provider      string
	Model         string
	SubcallModel  string
	MaxIterations int
	MaxDepth      int
	MaxCost       float64
	MaxTokens     int64
	MaxTime       time.Duration
	MaxErrors     int
	MaxSubcalls   int
	Protocol      string
	Temperature   float64
	MaxOutTokens  int
	SystemPrompt  string
	Vars          []string
	ContextJSON   string
	CompactAfter  int
	Trace         string
	TraceHTML     string
	Format        string
	Backend       string
	BaseURL       string
	Transcript    string
	Quiet         bool
	Verbose       bool
	Changed       func(name string) bool
	Limits        cmdutil.LimitFlags
	Tools         []string

	// Sandbox replaces the backend's sessions (tests).
	Sandbox core.SandboxFactory
}

// NewCmd builds the command; runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "run (TASKFILE | --task TEXT [--context FILE|-]) [flags]",
		Short: "Answer a task about a large context with a Recursive Language Model",
		Long: `Answer a task with a Recursive Language Model: the model never reads the
context directly; it explores it with Python code in a REPL whose variable
` + "`context`" + ` holds it, asks sub-questions with llm_query, hands sub-tasks to
recursive copies of itself with rlm_query, and finishes with FINAL(answer)
or FINAL_VAR(variable).

A TASKFILE is TOML: task, one of context_file / context_glob / context, and
optionally provider, model, subcall_model, transcript, a [budget] table,
tools (Python files preloaded into every REPL), [[tool]] tables
(host-side tools: a command or an HTTP endpoint) and [[mcp]] tables (an
MCP server's tools); see docs/tools.md.
Flags override the file, which overrides rlm.toml's [run] table.

The answer goes to stdout; progress to stderr when it is a terminal.

Exit status:
  0    an answer was found
  2    usage or configuration error
  3    a budget (tokens, cost, time) ran out before an answer, or the
       iterations ran out and the forced answer had no FINAL
  4    the model provider failed (after retries)
  5    the sandbox (REPL) failed
  130  interrupted`,
		Example: `  rlm run examples/needle/task.toml --provider replay
  rlm run --task 'How many errors are logged?' --context app.log --provider openai --model gpt-4o-mini
  cat notes.txt | rlm run --task 'Summarise the decisions' --context - --format json
  rlm run task.toml --trace run.jsonl && rlm trace show run.jsonl
  rlm run task.toml --trace-html run.html   # the run as one HTML page`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Changed = cmd.Flags().Changed
			if len(args) == 1 {
				o.TaskFile = args[0]
			}
			if o.TaskFile == "" && o.Task == "" {
				return cmdutil.Usagef("give a TASKFILE or --task TEXT")
			}
			if o.Format != "text" && o.Format != "json" {
				return cmdutil.Usagef("--format %q: use text or json", o.Format)
			}
			if o.Quiet && o.Verbose {
				return cmdutil.Usagef("--quiet and --verbose exclude each other")
			}
			if runF != nil {
				return runF(o)
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Task, "task", "", "the task (overrides the task file's)")
	fl.StringVar(&o.Context, "context", "", "file whose content becomes `context`, or - for stdin (overrides the task file's)")
	fl.StringVar(&o.Provider, "provider", "", "model provider: "+strings.Join(llm.Providers(), ", ")+" (default from config: anthropic)")
	fl.StringVar(&o.Model, "model", "", "model driving the loop (default: the provider's)")
	fl.StringVar(&o.SubcallModel, "subcall-model", "", "model answering llm_query (default: --model)")
	fl.IntVar(&o.MaxIterations, "max-iterations", 0, "model turns per loop before a best answer is asked for (default 20)")
	fl.IntVar(&o.MaxDepth, "max-depth", 0, "deepest rlm_query recursion; 0 disables it (default 1)")
	fl.Float64Var(&o.MaxCost, "max-cost", 0, "cost cap of the whole run in USD (default: none)")
	fl.Int64Var(&o.MaxTokens, "max-tokens", 0, "token cap of the whole run, sub-calls included (default: none)")
	fl.DurationVar(&o.MaxTime, "max-time", 0, "wall-time cap of the whole run, e.g. 5m (default 30m)")
	fl.IntVar(&o.MaxErrors, "max-errors", 0, "failed code blocks in a row before a best answer is asked for (default 5)")
	fl.IntVar(&o.MaxSubcalls, "max-subcalls", 0, "llm_query and rlm_query calls of the whole run, at every depth (default: none)")
	fl.Float64Var(&o.Temperature, "temperature", 0, "sampling temperature of every model call (default: the model's)")
	fl.IntVar(&o.MaxOutTokens, "max-output-tokens", 0, "cap on each model reply, in tokens (default: the provider's)")
	fl.StringVar(&o.SystemPrompt, "system-prompt", "", "file whose text replaces the protocol's system prompt (tools are still listed after it)")
	fl.StringArrayVar(&o.Vars, "var", nil, "NAME=FILE: a named input; `context` becomes a dict of them and each NAME a REPL variable (a .json file decoded) (repeatable)")
	fl.IntVar(&o.CompactAfter, "compact-after", 0, "summarise a loop's older turns once its history passes this many characters (default: never)")
	fl.StringVar(&o.ContextJSON, "context-json", "", "JSON file decoded into `context` (a list or dict in Python), or - for stdin")
	fl.StringVar(&o.Protocol, "protocol", "", "how the model finishes and recurses: rlm (FINAL, rlm_query(task, ctx)) or reference (the reference implementation's answer dict, rlm_query(prompt, model), its max_depth) (default rlm)")
	fl.StringVar(&o.Trace, "trace", "", "write every event of the run to FILE as JSON lines")
	fl.StringVar(&o.TraceHTML, "trace-html", "", "write the run as one self-contained HTML page to FILE (what rlm trace view makes)")
	fl.StringVar(&o.Format, "format", "text", "output: text (the answer) or json (answer, source, usage)")
	fl.StringVarP(&o.Backend, "backend", "b", "", "what runs the REPL: auto, daemon, native or pyodide (default from config: auto)")
	o.Limits.Register(fl)
	fl.StringVar(&o.BaseURL, "base-url", "", "the provider's endpoint (OpenAI-compatible servers, a local Ollama...)")
	fl.StringVar(&o.Transcript, "transcript", "", "trace or transcript the replay provider answers from")
	fl.StringArrayVar(&o.Tools, "tools", nil, "Python `FILE.py` preloaded into every loop's REPL, its functions listed in the prompt (repeatable; added to the task file's tools)")
	fl.BoolVarP(&o.Quiet, "quiet", "q", false, "no progress on stderr")
	fl.BoolVarP(&o.Verbose, "verbose", "v", false, "one line on stderr per event (model call, code block, sub-call)")
	cmdutil.CompleteValues(cmd, "provider", llm.Providers()...)
	cmdutil.CompleteValues(cmd, "backend", client.Valid...)
	return cmd
}

// plan is everything resolved from flags, task file and config.
type plan struct {
	task         string
	ctx          *core.Context
	provider     string
	model        string
	subcallModel string
	llmOpts      llm.Options
	budget       engine.Budget
	limits       core.Limits
	maxOutput    int
	maxConc      int
	backend      string
	tools        engine.Tools
	mcp          []mcpSource
	protocol     string
	temperature  *float64
	maxOutTokens int
	system       string
	bindVars     bool
}

// resolve applies flag > task file > config > default.
func (o *Options) resolve(cfg config.Config) (*plan, error) {
	p := &plan{}
	var tf *TaskFile
	if o.TaskFile != "" {
		var err error
		if tf, err = LoadTaskFile(o.TaskFile); err != nil {
			return nil, err
		}
	} else {
		tf = &TaskFile{}
	}
	p.task = first(o.Task, tf.Task)
	if strings.TrimSpace(p.task) == "" {
		return nil, fmt.Errorf("%s has no task: set task = \"...\" or pass --task", o.TaskFile)
	}
	inputs, err := o.inputContext()
	if err != nil {
		return nil, err
	}
	switch {
	case inputs != nil:
		p.ctx, p.bindVars = inputs, len(o.Vars) > 0
	case o.Context == "-":
		b, err := io.ReadAll(o.F.IO.In)
		if err != nil {
			return nil, fmt.Errorf("reading the context from stdin: %w", err)
		}
		p.ctx = &core.Context{Data: b, Kind: "text"}
	case o.Context != "":
		b, err := os.ReadFile(o.Context)
		if err != nil {
			return nil, fmt.Errorf("cannot read --context file: %w", err)
		}
		p.ctx = &core.Context{Data: b, Kind: "text"}
	default:
		var err error
		if p.ctx, err = tf.LoadContext(); err != nil {
			return nil, err
		}
	}

	rc := cfg.Run
	m, err := modelflags.Resolve(cfg, modelflags.Choice{
		Provider: first(o.Provider, tf.Provider), Model: first(o.Model, tf.Model),
		SubcallModel: first(o.SubcallModel, tf.SubcallModel), BaseURL: o.BaseURL,
		Transcript: first(o.Transcript, tf.rel(tf.Transcript)),
	})
	if err != nil {
		return nil, err
	}
	p.provider, p.model, p.subcallModel, p.llmOpts = m.Provider, m.Model, m.SubcallModel, m.Options
	p.maxConc = rc.MaxConcurrent

	b := engine.Budget{
		MaxIterations: rc.MaxIterations, MaxDepth: rc.MaxDepth, MaxTokens: rc.MaxTokens,
		MaxCostUSD: rc.MaxCostUSD, MaxTime: time.Duration(rc.MaxTime), MaxErrors: rc.MaxErrors,
	}
	tb := tf.Budget
	setIf(&b.MaxIterations, tb.MaxIterations)
	setIf(&b.MaxDepth, tb.MaxDepth)
	setIf(&b.MaxTokens, tb.MaxTokens)
	setIf(&b.MaxCostUSD, tb.MaxCostUSD)
	setIf(&b.MaxErrors, tb.MaxErrors)
	if tb.MaxTime != nil {
		b.MaxTime = time.Duration(*tb.MaxTime)
	}
	cmdutil.Override(o.Changed, "max-iterations", &b.MaxIterations, o.MaxIterations)
	cmdutil.Override(o.Changed, "max-depth", &b.MaxDepth, o.MaxDepth)
	cmdutil.Override(o.Changed, "max-tokens", &b.MaxTokens, o.MaxTokens)
	cmdutil.Override(o.Changed, "max-cost", &b.MaxCostUSD, o.MaxCost)
	cmdutil.Override(o.Changed, "max-time", &b.MaxTime, o.MaxTime)
	cmdutil.Override(o.Changed, "max-errors", &b.MaxErrors, o.MaxErrors)
	setIf(&b.MaxSubcalls, tb.MaxSubcalls)
	cmdutil.Override(o.Changed, "max-subcalls", &b.MaxSubcalls, o.MaxSubcalls)
	if o.Changed("temperature") {
		if o.Temperature < 0 {
			return nil, fmt.Errorf("--temperature must not be negative (got %g)", o.Temperature)
		}
		t := o.Temperature
		p.temperature = &t
	}
	if o.CompactAfter < 0 {
		return nil, fmt.Errorf("--compact-after must not be negative (got %d)", o.CompactAfter)
	}
	if o.MaxOutTokens < 0 {
		return nil, fmt.Errorf("--max-output-tokens must not be negative (got %d)", o.MaxOutTokens)
	}
	p.maxOutTokens = o.MaxOutTokens
	if o.SystemPrompt != "" {
		b, err := os.ReadFile(o.SystemPrompt)
		if err != nil {
			return nil, fmt.Errorf("--system-prompt: %w", err)
		}
		if strings.TrimSpace(string(b)) == "" {
			return nil, fmt.Errorf("--system-prompt %s is empty", o.SystemPrompt)
		}
		p.system = string(b)
	}
	p.protocol = first(o.Protocol, tf.Protocol)
	if err := engine.CheckProtocol(p.protocol); err != nil {
		return nil, err
	}
	if p.protocol == engine.ProtocolReference {
		// The reference's max_depth counts the root (1: no recursion, its
		// default); the engine's counts the levels of children.
		ref := 1
		if o.Changed("max-depth") {
			ref = o.MaxDepth
		} else if tb.MaxDepth != nil {
			ref = *tb.MaxDepth
		}
		if ref < 1 {
			return nil, fmt.Errorf("with --protocol reference, --max-depth is the reference's max_depth, which counts the root: 1 is a root with no children (its default), 2 one level of children; got %d", ref)
		}
		b.MaxDepth = ref - 1
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	p.budget = b
	p.limits = core.Limits{Wall: time.Duration(cfg.Limits.Timeout), MaxOutputBytes: int64(cfg.Limits.MaxOutput)}
	if err := o.Limits.Apply(cfg.Limits, &p.limits); err != nil {
		return nil, err
	}
	p.maxOutput = rc.MaxOutputChars
	if p.tools, p.mcp, err = o.tools(tf); err != nil {
		return nil, err
	}
	p.backend = first(o.Backend, cfg.Backend)
	if err := client.Check(p.backend); err != nil {
		return nil, err
	}
	return p, nil
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func run(ctx context.Context, o *Options) error {
	cfg, _, err := o.F.Config()
	if err != nil {
		return err
	}
	p, err := o.resolve(cfg)
	if err != nil {
		return cmdutil.Usage(err)
	}
	llm.SetPrices(cfg.Pricing)
	if err := checkPriced(p); err != nil {
		return cmdutil.Usage(err)
	}
	if o.Verbose {
		p.llmOpts.Logger = slog.New(slog.NewTextHandler(o.F.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	prov, err := llm.New(p.provider, p.llmOpts)
	if err != nil {
		return cmdutil.Usage(err)
	}

	var page *traceview.Builder
	if o.TraceHTML != "" {
		if err := checkPagePath(o.TraceHTML, o.Trace); err != nil {
			return cmdutil.Usage(err)
		}
		page = traceview.NewBuilder()
	}
	var trace *traceFile
	if o.Trace != "" {
		if err := cmdutil.CheckOutputFile("--trace", o.Trace, "run.jsonl"); err != nil {
			return err
		}
		if trace, err = createTrace(o.Trace); err != nil {
			return cmdutil.Usage(err)
		}
		defer trace.Close()
	}

	extra := map[string]string{}
	factory := o.Sandbox
	if factory == nil {
		rt, err := client.Open(ctx, "python", o.F.BackendOptions(p.backend))
		if err != nil {
			err = fmt.Errorf("cannot start the python REPL: %w", err)
			if cmdutil.Refused(err) {
				return cmdutil.Usage(err)
			}
			return &cmdutil.ExitError{Code: ExitSandbox, Err: err}
		}
		defer rt.Close()
		extra["backend"] = rt.Backend
		factory = func(ctx context.Context, so core.SessionOptions) (core.Session, error) {
			so.Runtime = "python"
			return rt.OpenSession(ctx, so)
		}
	}

	mcpTools, closeMCP, err := connectMCP(ctx, p.mcp)
	if err != nil {
		return cmdutil.Usage(err)
	}
	defer closeMCP()
	p.tools.Host = append(p.tools.Host, mcpTools...)

	prog := newProgress(o.F.IO.ErrOut, o.Quiet, o.Verbose)
	opts := engine.Options{
		Provider: prov, Model: p.model, SubcallModel: p.subcallModel, Sandbox: factory,
		Budget: p.budget, CellLimits: p.limits, MaxOutputChars: p.maxOutput, MaxConcurrent: p.maxConc,
		OnEvent:  prog.event,
		Record:   engine.RunConfig{Provider: p.provider, Extra: extra},
		Tools:    p.tools,
		Protocol: p.protocol,

		Temperature: p.temperature, MaxTokensPerCall: p.maxOutTokens, SystemPrompt: p.system,
		BindContextVars: p.bindVars, CompactAfterChars: o.CompactAfter,
	}
	if trace != nil {
		opts.Trace = trace
	}
	if page != nil {
		// The engine calls OnEvent under its trace lock, so the builder
		// sees the events one at a time and in trace order.
		opts.OnEvent = func(ev engine.Event) {
			prog.event(ev)
			page.Add(ev)
		}
	}
	eng, err := engine.New(opts)
	if err != nil {
		return cmdutil.Usage(err)
	}
	prog.start()
	res, runErr := eng.Run(ctx, p.task, p.ctx)
	prog.stop()
	if trace != nil {
		if err := trace.Close(); err != nil {
			fmt.Fprintf(o.F.IO.ErrOut, "rlm: warning: the trace %s is incomplete: %v\n", o.Trace, err)
		}
	}
	if page != nil {
		// Like --trace, a page that cannot be written does not hide the
		// run's answer or its exit status: it is reported.
		if err := traceview.WriteFile(o.TraceHTML, page.Page()); err != nil {
			fmt.Fprintf(o.F.IO.ErrOut, "rlm: warning: --trace-html: %v\n", err)
		}
	}
	if o.Format == "json" {
		out := struct {
			Answer     string       `json:"answer"`
			Source     string       `json:"answer_source"`
			NoFinal    bool         `json:"no_final,omitempty"`
			MissingVar string       `json:"missing_var,omitempty"`
			Usage      engine.Usage `json:"usage"`
			Error      string       `json:"error,omitempty"`
		}{res.Answer, res.Source, res.NoFinal, res.MissingVar, res.Usage, ""}
		if runErr != nil {
			out.Error = runErr.Error()
		}
		enc := json.NewEncoder(o.F.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else if runErr == nil || res.Source == engine.SourcePartial {
		ans := res.Answer
		if !strings.HasSuffix(ans, "\n") {
			ans += "\n"
		}
		io.WriteString(o.F.IO.Out, ans)
	}
	if runErr == nil && res.NoFinal {
		// The reply is printed (it may hold the answer), but a script must
		// not take it for one.
		if res.MissingVar != "" {
			fmt.Fprintf(o.F.IO.ErrOut, "rlm: the turns ran out and the model's forced answer is FINAL_VAR(%s), but the REPL has no variable %s: there is no answer; the output above is the model's whole last reply\n", res.MissingVar, res.MissingVar)
		} else {
			fmt.Fprintln(o.F.IO.ErrOut, "rlm: the turns ran out and the model's forced answer has no FINAL(...): the output above is its whole last reply, not a marked answer")
		}
		return cmdutil.Exit(ExitBudget)
	}
	if runErr == nil {
		return nil
	}
	if res.Source == engine.SourcePartial {
		runErr = fmt.Errorf("%w; the output above is partial: answer[\"content\"] as the model had left it, never marked ready", runErr)
	}
	return &cmdutil.ExitError{Code: exitCode(ctx, runErr), Err: runErr}
}

// checkPriced refuses --max-cost for a model without a known price: the
// cap could not be enforced, and a warning alone is easy to miss.
func checkPriced(p *plan) error {
	return modelflags.CheckPriced(p.provider, p.budget.MaxCostUSD, p.model, p.subcallModel)
}

func exitCode(ctx context.Context, err error) int {
	switch {
	case errors.Is(err, engine.ErrBudgetExhausted):
		return ExitBudget
	case errors.Is(err, engine.ErrTools):
		return cmdutil.ExitUsage // the task file's or --tools' fault
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return ExitInterrupted
	case cmdutil.Refused(err):
		// the REPL was refused (a level or limit it cannot hold): the
		// flags or configuration are at fault, not the sandbox
		return cmdutil.ExitUsage
	case errors.Is(err, engine.ErrProvider):
		return ExitProvider
	case errors.Is(err, engine.ErrSandbox):
		return ExitSandbox
	}
	return cmdutil.ExitFailure
}

// checkPagePath refuses a --trace-html path that cannot be written or
// would overwrite the trace, before the run spends anything.
func checkPagePath(path, trace string) error {
	if trace != "" && filepath.Clean(path) == filepath.Clean(trace) {
		return cmdutil.Usagef("--trace-html %s is also the --trace file: give the page another name", path)
	}
	return cmdutil.CheckOutputFile("--trace-html", path, "run.html")
}

// traceFile remembers the first write error so that a full disk does not
// end the run but is reported.
type traceFile struct {
	f   *os.File
	err error
}

func createTrace(path string) (*traceFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	return &traceFile{f: f}, nil
}

func (t *traceFile) Write(b []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.f.Write(b)
	if err != nil {
		t.err = err
	}
	return n, err
}

func (t *traceFile) Close() error {
	if t.f == nil {
		return t.err
	}
	err := t.f.Close()
	t.f = nil
	if t.err == nil {
		t.err = err
	}
	return t.err
}
