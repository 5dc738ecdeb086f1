// Package tracecmd implements `rlm trace show` (print a run's trace, the
// JSONL file `rlm run --trace` writes, as a readable tree of loops),
// `rlm trace view` (write it as one self-contained HTML page) and
// `rlm trace export` / `rlm trace import` (to and from the reference RLM
// implementation's log).
package tracecmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/traceview"
)

// NewCmd builds `rlm trace`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Inspect traces written by rlm run --trace",
	}
	var full bool
	var lines int
	show := &cobra.Command{
		Use:   "show FILE",
		Short: "Print a trace as a tree: each loop, its model turns, code, output and sub-calls",
		Example: `  rlm run task.toml --trace run.jsonl
  rlm trace show run.jsonl
  rlm trace show --full run.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			evs, rep, err := Load(args[0])
			if err != nil {
				return cmdutil.Usage(err)
			}
			warnIncomplete(f.IO.ErrOut, args[0], rep)
			if full {
				lines = 0
			}
			if err := Show(f.IO.Out, evs, lines); err != nil {
				return err
			}
			if rep.Cut || rep.Bad > 0 {
				fmt.Fprintf(f.IO.Out, "(the trace is incomplete: %s)\n", strings.Join(rep.Notes(), "; "))
			}
			return nil
		},
	}
	show.Flags().BoolVar(&full, "full", false, "print code, outputs and answers whole")
	show.Flags().IntVar(&lines, "lines", 8, "lines kept of each code block, output and model reply (head and tail)")
	cmd.AddCommand(show, NewCmdView(f, nil), NewCmdExport(f), NewCmdImport(f))
	return cmd
}

// Load reads a JSONL trace, skipping what cannot be read (see
// [traceview.Scan]); the report says what was skipped. A log of the
// reference RLM implementation is read too (see rlm trace import).
func Load(path string) ([]engine.Event, traceview.Report, error) {
	if isReferenceLog(path) {
		return loadReference(path)
	}
	return traceview.ReadFile(path)
}

// warnIncomplete tells on stderr why a trace is incomplete: the command
// still shows what it read, so this is a warning, not a failure.
func warnIncomplete(w io.Writer, path string, rep traceview.Report) {
	if rep.Cut || rep.Bad > 0 {
		for _, n := range rep.Notes() {
			fmt.Fprintf(w, "rlm: warning: %s: %s\n", path, n)
		}
	}
}

type printer struct {
	w      io.Writer
	lines  int
	byNode map[int][]engine.Event
	done   map[int]bool
}

// Show prints the tree. lines bounds each multi-line text (0: all).
func Show(w io.Writer, evs []engine.Event, lines int) error {
	p := &printer{w: w, lines: lines, byNode: map[int][]engine.Event{}, done: map[int]bool{}}
	var start, end *engine.Event
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case engine.EventRunStart:
			start = ev
		case engine.EventRunEnd:
			end = ev
		default:
			p.byNode[ev.Node] = append(p.byNode[ev.Node], *ev)
		}
	}
	if start != nil {
		fmt.Fprintf(w, "run %s\n", start.Time.Format("2006-01-02 15:04:05Z"))
		p.text("", "task", start.Task)
		if c := start.Config; c != nil {
			fmt.Fprintf(w, "  provider %s · model %s · sub-calls %s", c.Provider, c.Model, c.SubcallModel)
			for k, v := range c.Extra {
				fmt.Fprintf(w, " · %s %s", k, v)
			}
			b := c.Budget
			fmt.Fprintf(w, "\n  budget: %d iterations, depth %d", b.MaxIterations, b.MaxDepth)
			if b.MaxTokens > 0 {
				fmt.Fprintf(w, ", %d tokens", b.MaxTokens)
			}
			if b.MaxCostUSD > 0 {
				fmt.Fprintf(w, ", $%.4f", b.MaxCostUSD)
			}
			if b.MaxTime > 0 {
				fmt.Fprintf(w, ", %s", b.MaxTime)
			}
			fmt.Fprintln(w)
		}
		if c := start.Context; c != nil {
			fmt.Fprintf(w, "  context: %s, %d characters\n", c.Type, c.Chars)
		}
	}
	p.node(0, "")
	// Loops not reached from the root (a truncated trace) still show.
	for id := range p.byNode {
		if !p.done[id] {
			p.node(id, "")
		}
	}
	if end != nil {
		if end.Error != "" {
			fmt.Fprintf(w, "error: %s\n", end.Error)
		} else {
			fmt.Fprintf(w, "answer (%s):\n", end.Source)
			p.block("  ", end.Answer)
		}
		if u := end.Totals; u != nil {
			fmt.Fprintf(w, "usage: %d input + %d output tokens · %s · %d model calls · %d iterations · %d sub-calls · max depth %d · %.1fs\n",
				u.InputTokens, u.OutputTokens, u.CostText(), u.Calls, u.Iterations, u.Subcalls, u.MaxDepthReached, float64(u.DurationMs)/1000)
		}
	} else {
		fmt.Fprintln(w, "(the trace ends before the run did)")
	}
	return nil
}

func (p *printer) node(id int, ind string) {
	if p.done[id] {
		return
	}
	p.done[id] = true
	evs := p.byNode[id]
	if len(evs) == 0 {
		return
	}
	w := p.w
	fmt.Fprintf(w, "%sloop %d (depth %d)", ind, id, evs[0].Depth)
	if evs[0].Parent != nil {
		fmt.Fprintf(w, ", started by loop %d", *evs[0].Parent)
	}
	fmt.Fprintln(w)
	in := ind + "  "
	for _, ev := range evs {
		switch ev.Type {
		case engine.EventIteration:
			fmt.Fprintf(w, "%s── iteration %d\n", in, ev.Iteration)
		case engine.EventLLMCall:
			r := ev.Response
			switch ev.Caller {
			case "llm_query", "rlm_fallback":
				prompt := ""
				if len(ev.Request.Messages) > 0 {
					prompt = ev.Request.Messages[0].Content
				}
				fmt.Fprintf(w, "%s%s (%s, %d→%d tokens, %.0f ms)\n", in, ev.Caller, ev.Request.Model, r.Usage.InputTokens, r.Usage.OutputTokens, ev.LatencyMs)
				p.text(in+"  ", "prompt", prompt)
				p.text(in+"  ", "answer", r.Text)
			default:
				what := "model"
				if ev.Caller == "forced" {
					what = "model, asked for its best answer"
				}
				fmt.Fprintf(w, "%s%s (%s, %d→%d tokens, %.0f ms", in, what, r.Model, r.Usage.InputTokens, r.Usage.OutputTokens, ev.LatencyMs)
				if r.Attempts > 1 {
					fmt.Fprintf(w, ", %d attempts", r.Attempts)
				}
				fmt.Fprintln(w, "):")
				p.block(in+"  │ ", r.Text)
			}
		case engine.EventLLMError:
			fmt.Fprintf(w, "%s%s call failed: %s\n", in, ev.Caller, ev.Error)
		case engine.EventCode:
			res := ev.Result
			fmt.Fprintf(w, "%scode block %d → %s in %d ms", in, ev.Block, res.EndedBy, res.DurationMs)
			if res.StateLost {
				fmt.Fprint(w, " (REPL restarted)")
			}
			fmt.Fprintln(w, ":")
			p.block(in+"  > ", ev.Code)
			p.block(in+"  = ", ev.Output)
		case engine.EventSubcall:
			switch {
			case ev.Child != nil:
				fmt.Fprintf(w, "%srlm_query → loop %d (context %d characters)\n", in, *ev.Child, ev.ContextChars)
				p.text(in+"  ", "task", ev.Prompt)
				p.node(*ev.Child, in+"  ")
			case ev.Kind == "rlm_query" && ev.Error != "":
				fmt.Fprintf(w, "%srlm_query refused: %s\n", in, ev.Error)
			case ev.Kind == "rlm_query":
				fmt.Fprintf(w, "%srlm_query: %s\n", in, ev.Message)
			}
		case engine.EventSubcallEnd:
			if ev.Error != "" {
				fmt.Fprintf(w, "%sloop %d failed: %s\n", in, *ev.Child, ev.Error)
			} else if ev.Child != nil {
				fmt.Fprintf(w, "%sloop %d returned (%s): %s\n", in, *ev.Child, ev.Source, oneLine(ev.Answer, 100))
			}
		case engine.EventToolCall:
			if ev.Error != "" {
				fmt.Fprintf(w, "%stool %s failed after %.0f ms: %s\n", in, ev.Kind, ev.LatencyMs, ev.Error)
			} else {
				fmt.Fprintf(w, "%stool %s (%.0f ms)\n", in, ev.Kind, ev.LatencyMs)
			}
			p.text(in+"  ", "args", ev.Prompt)
			if ev.Error == "" {
				p.text(in+"  ", "answer", ev.Answer)
			}
		case engine.EventCompaction:
			fmt.Fprintf(w, "%s~ compacted: %s\n", in, ev.Message)
		case engine.EventBudgetWarning:
			fmt.Fprintf(w, "%s! budget warning: %s\n", in, ev.Message)
		case engine.EventWarning:
			fmt.Fprintf(w, "%s! warning: %s\n", in, ev.Message)
		case engine.EventFinal:
			fmt.Fprintf(w, "%s✔ answer (%s):\n", in, ev.Source)
			p.block(in+"  ", ev.Answer)
		}
	}
}

// text prints "label: value" with a long value shortened to one line.
func (p *printer) text(ind, label, s string) {
	n := 160
	if p.lines == 0 {
		n = 1 << 30
	}
	fmt.Fprintf(p.w, "%s%s: %s\n", ind, label, oneLine(s, n))
}

// block prints s with every line prefixed, keeping head and tail lines.
func (p *printer) block(prefix, s string) {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if p.lines > 0 && len(ls) > p.lines+2 {
		head := (p.lines + 1) / 2
		tail := p.lines - head
		cut := len(ls) - head - tail
		ls = append(append(ls[:head:head], fmt.Sprintf("… %d lines …", cut)), ls[len(ls)-tail:]...)
	}
	for _, l := range ls {
		if p.lines > 0 && len([]rune(l)) > 200 {
			l = string([]rune(l)[:199]) + "…"
		}
		fmt.Fprintf(p.w, "%s%s\n", prefix, l)
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
