// Package benchcmd implements `rlm bench`: the RLM paper's long-context
// task families, generated offline (core/bench), answered by the RLM loop
// and by the same model given the context directly, scored the paper's
// way and printed as a table.
package benchcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/cmd/rlm/cli/modelflags"
	"github.com/rlmkit/rlm/cmd/rlm/cli/runcmd"
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/bench"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

// Options are bench's parsed flags.
type Options struct {
	F *cmdutil.Factory

	Families      []string
	Sizes         []string
	Tasks         int
	Seed          uint64
	Window        int
	NoBaseline    bool
	Provider      string
	Model         string
	SubcallModel  string
	BaseURL       string
	Transcript    string
	MaxIterations int
	MaxDepth      int
	MaxCost       float64
	MaxTokens     int64
	MaxTime       time.Duration
	Backend       string
	TraceDir      string
	WriteTasks    string
	Format        string
	Quiet         bool
	Changed       func(string) bool
	Limits        cmdutil.LimitFlags
}

// DefaultSizes span the paper's S-NIAH range, 2^13 to 2^20 characters.
var DefaultSizes = []string{"8K", "64K", "1M"}

// DefaultWindow is the baseline's window in tokens when none is given.
const DefaultWindow = 128_000

// NewCmd builds `rlm bench`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Score the RLM loop against the plain model on the RLM paper's long-context tasks",
		Long: `Generate the long-context task families of the Recursive Language Models
paper (arXiv 2512.24601, section 3) offline, answer each task twice, and
print a table of scores:

  sniah   one needle (a magic number) in a haystack of filler prose;
          exact match
  oolong  lines of (date, user, question) whose labels the model must
          infer; how many have a label (scored 0.75^|difference|), which
          label is most common, how two compare (exact match)
  pairs   the same lines; every pair of users meeting a condition on
          their labels (F1 over the pairs)

The first answer is the RLM loop's (what rlm run does, the context in the
REPL); the second the baseline's: the same model given the context in its
prompt, cut to --window tokens (× 4 characters). Tasks depend only on
(family, size, index, --seed): the same flags give the same tasks.

The provider, budget and sandbox flags are rlm run's (budgets apply to
each task's loop). With --provider replay and a transcript
whose llm_call lines carry caller "root" (the loop's turns) and
"baseline" (the baseline's answers), bench runs offline, as CI does.`,
		Example: `  rlm bench --provider openai --model gpt-5-mini --tasks 5
  rlm bench --families sniah --sizes 8K,32K,128K,512K,1M --window 32000
  rlm bench --provider replay --transcript scripted.jsonl --tasks 1 --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Changed = cmd.Flags().Changed
			if o.Format != "text" && o.Format != "json" {
				return cmdutil.Usagef("--format %q: use text or json", o.Format)
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&o.Families, "families", bench.Families, "task families to run: "+strings.Join(bench.Families, ", "))
	fl.StringSliceVar(&o.Sizes, "sizes", DefaultSizes, "context sizes in characters: numbers, 8K, 1M or 2^N (at least 1K)")
	fl.IntVar(&o.Tasks, "tasks", 3, "tasks per family and size")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the generators (the same seed, the same tasks)")
	fl.IntVar(&o.Window, "window", DefaultWindow, "the baseline model's context window in tokens; the context is cut to 4 characters a token")
	fl.BoolVar(&o.NoBaseline, "no-baseline", false, "run the RLM loop only")
	fl.StringVar(&o.Provider, "provider", "", "model provider: "+strings.Join(llm.Providers(), ", ")+" (default from config: anthropic)")
	fl.StringVar(&o.Model, "model", "", "model driving the loop and answering the baseline (default: the provider's)")
	fl.StringVar(&o.SubcallModel, "subcall-model", "", "model answering llm_query (default: --model)")
	fl.StringVar(&o.BaseURL, "base-url", "", "the provider's endpoint (OpenAI-compatible servers, a local Ollama...)")
	fl.StringVar(&o.Transcript, "transcript", "", "trace or transcript the replay provider answers from")
	fl.IntVar(&o.MaxIterations, "max-iterations", 0, "model turns per loop before a best answer is asked for (default 20)")
	fl.IntVar(&o.MaxDepth, "max-depth", 0, "deepest rlm_query recursion; 0 disables it (default 1)")
	fl.Float64Var(&o.MaxCost, "max-cost", 0, "cost cap of each task's RLM run in USD (default: none)")
	fl.Int64Var(&o.MaxTokens, "max-tokens", 0, "token cap of each task's RLM run (default: none)")
	fl.DurationVar(&o.MaxTime, "max-time", 0, "wall-time cap of each task's RLM run, e.g. 10m (default 30m)")
	o.Limits.Register(fl)
	fl.StringVarP(&o.Backend, "backend", "b", "", "what runs the REPL: auto, daemon, native or pyodide (default from config: auto)")
	fl.StringVar(&o.TraceDir, "trace-dir", "", "write each task's RLM run to DIR/TASK.jsonl (rlm trace show, view, export read them)")
	fl.StringVar(&o.WriteTasks, "write-tasks", "", "write the generated tasks to DIR (tasks.jsonl and one context file each) and stop: nothing is run")
	fl.StringVar(&o.Format, "format", "text", "output: text (the table) or json (the table's rows and every task's answers)")
	fl.BoolVarP(&o.Quiet, "quiet", "q", false, "no line per task on stderr")
	cmdutil.CompleteValues(cmd, "provider", llm.Providers()...)
	cmdutil.CompleteValues(cmd, "backend", client.Valid...)
	cmdutil.CompleteValues(cmd, "families", bench.Families...)
	return cmd
}

// plan checks the flags and lists the tasks to run.
func (o *Options) plan() ([]bench.Task, error) {
	if o.Tasks < 1 {
		return nil, fmt.Errorf("--tasks must be at least 1 (got %d)", o.Tasks)
	}
	if o.Window < 1 && !o.NoBaseline {
		return nil, fmt.Errorf("--window must be at least 1 token (got %d); --no-baseline runs without the baseline", o.Window)
	}
	var sizes []int
	for _, s := range o.Sizes {
		n, err := bench.ParseSize(s)
		if err != nil {
			return nil, fmt.Errorf("--sizes: %w", err)
		}
		if n < 1024 {
			return nil, fmt.Errorf("--sizes: %s is under 1K characters: the smallest context is 1K", s)
		}
		sizes = append(sizes, n)
	}
	var tasks []bench.Task
	for _, fam := range o.Families {
		if !slices.Contains(bench.Families, fam) {
			return nil, fmt.Errorf("--families: unknown family %q: use %s", fam, strings.Join(bench.Families, ", "))
		}
		for _, n := range sizes {
			for i := range o.Tasks {
				t, err := bench.Generate(fam, n, i, o.Seed)
				if err != nil {
					return nil, err
				}
				tasks = append(tasks, t)
			}
		}
	}
	return tasks, nil
}

// budget is rlm run's: rlm.toml's [run], then the flags.
func (o *Options) budget(rc config.Run) (engine.Budget, error) {
	b := engine.Budget{MaxIterations: rc.MaxIterations, MaxDepth: rc.MaxDepth, MaxTokens: rc.MaxTokens,
		MaxCostUSD: rc.MaxCostUSD, MaxTime: time.Duration(rc.MaxTime), MaxErrors: rc.MaxErrors}
	cmdutil.Override(o.Changed, "max-iterations", &b.MaxIterations, o.MaxIterations)
	cmdutil.Override(o.Changed, "max-depth", &b.MaxDepth, o.MaxDepth)
	cmdutil.Override(o.Changed, "max-tokens", &b.MaxTokens, o.MaxTokens)
	cmdutil.Override(o.Changed, "max-cost", &b.MaxCostUSD, o.MaxCost)
	cmdutil.Override(o.Changed, "max-time", &b.MaxTime, o.MaxTime)
	return b, b.Validate()
}

func run(ctx context.Context, o *Options) error {
	tasks, err := o.plan()
	if err != nil {
		return cmdutil.Usage(err)
	}
	if o.WriteTasks != "" {
		return writeTasks(o.F.IO.ErrOut, o.WriteTasks, tasks)
	}
	cfg, _, err := o.F.Config()
	if err != nil {
		return err
	}
	m, err := modelflags.Resolve(cfg, modelflags.Choice{Provider: o.Provider, Model: o.Model,
		SubcallModel: o.SubcallModel, BaseURL: o.BaseURL, Transcript: o.Transcript})
	if err != nil {
		return cmdutil.Usage(err)
	}
	b, err := o.budget(cfg.Run)
	if err != nil {
		return cmdutil.Usage(err)
	}
	llm.SetPrices(cfg.Pricing)
	if err := modelflags.CheckPriced(m.Provider, b.MaxCostUSD, m.Model, m.SubcallModel); err != nil {
		return cmdutil.Usage(err)
	}
	prov, err := llm.New(m.Provider, m.Options)
	if err != nil {
		return cmdutil.Usage(err)
	}
	if err := checkDir("--trace-dir", o.TraceDir); err != nil {
		return err
	}
	limits := core.Limits{Wall: time.Duration(cfg.Limits.Timeout), MaxOutputBytes: int64(cfg.Limits.MaxOutput)}
	if err := o.Limits.Apply(cfg.Limits, &limits); err != nil {
		return cmdutil.Usage(err)
	}
	backend := o.Backend
	if backend == "" {
		backend = cfg.Backend
	}
	if err := client.Check(backend); err != nil {
		return cmdutil.Usage(err)
	}
	rt, err := client.Open(ctx, "python", o.F.BackendOptions(backend))
	if err != nil {
		err = fmt.Errorf("cannot start the python REPL: %w", err)
		if cmdutil.Refused(err) {
			return cmdutil.Usage(err)
		}
		return &cmdutil.ExitError{Code: runcmd.ExitSandbox, Err: err}
	}
	defer rt.Close()
	r := &bench.Runner{
		Engine: engine.Options{
			Provider: prov, Model: m.Model, SubcallModel: m.SubcallModel, Budget: b,
			CellLimits:     limits,
			MaxOutputChars: cfg.Run.MaxOutputChars, MaxConcurrent: cfg.Run.MaxConcurrent,
			Sandbox: func(ctx context.Context, so core.SessionOptions) (core.Session, error) {
				so.Runtime = "python"
				return rt.OpenSession(ctx, so)
			},
			Record: engine.RunConfig{Provider: m.Provider, Extra: map[string]string{"backend": rt.Backend}},
		},
		WindowChars:  o.Window * bench.CharsPerToken,
		SkipBaseline: o.NoBaseline,
	}
	if o.TraceDir != "" {
		r.TraceTo = func(t bench.Task) (io.WriteCloser, error) {
			return os.Create(filepath.Join(o.TraceDir, t.ID+".jsonl"))
		}
	}
	var outs []bench.Outcome
	for _, t := range tasks {
		out, err := r.Run(ctx, t)
		if err != nil {
			if ctx.Err() != nil {
				return &cmdutil.ExitError{Code: runcmd.ExitInterrupted, Err: fmt.Errorf("interrupted after %d of %d tasks", len(outs), len(tasks))}
			}
			return err
		}
		outs = append(outs, out)
		if !o.Quiet {
			progress(o.F.IO.ErrOut, out)
		}
	}
	rows := bench.Summarize(outs)
	if o.Format == "json" {
		enc := json.NewEncoder(o.F.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Provider string          `json:"provider"`
			Model    string          `json:"model"`
			Seed     uint64          `json:"seed"`
			Window   int             `json:"window_tokens"`
			Rows     []bench.Row     `json:"rows"`
			Tasks    []bench.Outcome `json:"tasks"`
		}{m.Provider, m.Model, o.Seed, o.Window, rows, outs})
	}
	fmt.Fprintf(o.F.IO.Out, "rlm bench: %s %s, seed %d; baseline window %d tokens (%d characters)\n\n", m.Provider, m.Model, o.Seed, o.Window, o.Window*bench.CharsPerToken)
	return bench.PrintTable(o.F.IO.Out, rows)
}

// progress prints one line per task: its scores and why a run failed.
func progress(w io.Writer, o bench.Outcome) {
	line := fmt.Sprintf("%s: RLM %.3f", o.Task.ID, o.RLM.Score)
	if o.RLM.Error != "" {
		line += " (" + o.RLM.Error + ")"
	}
	if b := o.Baseline; b != nil {
		line += fmt.Sprintf(", baseline %.3f", b.Score)
		if b.Error != "" {
			line += " (" + b.Error + ")"
		}
		if b.Cut > 0 {
			line += fmt.Sprintf(" [context cut by %d characters]", b.Cut)
		}
	}
	fmt.Fprintln(w, line)
}

// checkDir refuses a directory flag naming no directory ("" is unset).
func checkDir(flag, dir string) error {
	if dir == "" {
		return nil
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return cmdutil.Usagef("%s %s is not a directory: create it first", flag, dir)
	}
	return nil
}

// writeTasks writes the tasks, so that other tools (the reference
// implementation, another model) can be run on the very same inputs:
// DIR/tasks.jsonl has one line per task (its question, expected answer
// and how it is scored) naming its context file, DIR/ID.txt.
func writeTasks(w io.Writer, dir string, tasks []bench.Task) error {
	if err := checkDir("--write-tasks", dir); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "tasks.jsonl"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	for _, t := range tasks {
		name := t.ID + ".txt"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(t.Context), 0o644); err != nil {
			f.Close()
			return err
		}
		line := struct {
			bench.Task
			ContextFile  string `json:"context_file"`
			ContextChars int    `json:"context_chars"`
		}{t, name, len(t.Context)}
		if err := enc.Encode(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %d tasks to %s (tasks.jsonl and their contexts)\n", len(tasks), dir)
	return nil
}
