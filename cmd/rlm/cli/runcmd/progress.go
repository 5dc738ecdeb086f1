package runcmd

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core/engine"
)

// progress shows the run on stderr: a status line rewritten in place when
// stderr is a terminal, one line per event with --verbose, nothing with
// --quiet or when stderr is not a terminal.
type progress struct {
	w       io.Writer
	live    bool // rewrite a status line
	verbose bool
	quiet   bool

	mu     sync.Mutex
	begin  time.Time
	iter   int
	depth  int
	totals engine.Usage
	shown  bool
	done   chan struct{}
}

func newProgress(w io.Writer, quiet, verbose bool) *progress {
	p := &progress{w: w, verbose: verbose, quiet: quiet}
	if !quiet && !verbose {
		p.live = isTerminal(w)
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) start() {
	p.begin = time.Now()
	if !p.live {
		return
	}
	p.done = make(chan struct{})
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.mu.Lock()
				p.drawLocked()
				p.mu.Unlock()
			case <-p.done:
				return
			}
		}
	}()
}

func (p *progress) stop() {
	if p.done != nil {
		close(p.done)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

func (p *progress) event(ev engine.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Totals != nil {
		p.totals = *ev.Totals
	}
	if ev.Type == engine.EventIteration {
		p.depth = ev.Depth
		if ev.Depth == 0 {
			p.iter = ev.Iteration
		}
	}
	if p.verbose {
		if line := describe(ev); line != "" {
			fmt.Fprintf(p.w, "[%6.1fs] %s%s\n", time.Since(p.begin).Seconds(), strings.Repeat("  ", ev.Depth), line)
		}
		return
	}
	if p.live {
		if ev.Type == engine.EventBudgetWarning || ev.Type == engine.EventWarning {
			fmt.Fprintf(p.w, "\r\033[Krlm: warning: %s\n", ev.Message)
		}
		p.drawLocked()
		return
	}
	// A warning that is not about a budget (a replay that does not match
	// its recording) says the answer may be wrong: it is shown even when
	// stderr is not a terminal, unless --quiet.
	if ev.Type == engine.EventWarning && !p.quiet {
		fmt.Fprintf(p.w, "rlm: warning: %s\n", ev.Message)
	}
}

func (p *progress) drawLocked() {
	if !p.live || p.begin.IsZero() {
		return
	}
	u := p.totals
	fmt.Fprintf(p.w, "\r\033[Krlm: iteration %d · depth %d · %s tokens · %s · %s",
		p.iter, p.depth, human(u.InputTokens+u.OutputTokens), u.CostText(), time.Since(p.begin).Round(100*time.Millisecond))
	p.shown = true
}

func human(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	case n >= 1_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// describe is the --verbose line of an event.
func describe(ev engine.Event) string {
	switch ev.Type {
	case engine.EventRunStart:
		return fmt.Sprintf("run: %s (model %s, sub-calls %s)", oneLine(ev.Task, 80), ev.Config.Model, ev.Config.SubcallModel)
	case engine.EventIteration:
		return fmt.Sprintf("loop %d iteration %d", ev.Node, ev.Iteration)
	case engine.EventLLMCall:
		r := ev.Response
		return fmt.Sprintf("%s call: %d→%d tokens, %.0f ms, %d attempt(s): %s", ev.Caller, r.Usage.InputTokens, r.Usage.OutputTokens, ev.LatencyMs, r.Attempts, oneLine(r.Text, 100))
	case engine.EventLLMError:
		return fmt.Sprintf("%s call failed: %s", ev.Caller, ev.Error)
	case engine.EventCode:
		return fmt.Sprintf("code block %d (%s, %d ms): %s → %s", ev.Block, ev.Result.EndedBy, ev.Result.DurationMs, oneLine(ev.Code, 60), oneLine(ev.Output, 80))
	case engine.EventSubcall:
		if ev.Child != nil {
			return fmt.Sprintf("rlm_query → loop %d: %s", *ev.Child, oneLine(ev.Prompt, 80))
		}
		if ev.Kind == "rlm_query" {
			return fmt.Sprintf("rlm_query (%s): %s", ev.Message, oneLine(ev.Prompt, 80))
		}
		return "" // its llm_call line says it all
	case engine.EventSubcallEnd:
		if ev.Error != "" {
			return fmt.Sprintf("loop %d failed: %s", *ev.Child, ev.Error)
		}
		return ""
	case engine.EventToolCall:
		if ev.Error != "" {
			return fmt.Sprintf("tool %s(%s) failed (%.0f ms): %s", ev.Kind, oneLine(ev.Prompt, 60), ev.LatencyMs, oneLine(ev.Error, 100))
		}
		return fmt.Sprintf("tool %s(%s) (%.0f ms) → %s", ev.Kind, oneLine(ev.Prompt, 60), ev.LatencyMs, oneLine(ev.Answer, 80))
	case engine.EventBudgetWarning, engine.EventWarning:
		return "warning: " + ev.Message
	case engine.EventFinal:
		return fmt.Sprintf("loop %d answer (%s): %s", ev.Node, ev.Source, oneLine(ev.Answer, 100))
	case engine.EventRunEnd:
		u := ev.Totals
		return fmt.Sprintf("done: %d iterations, %d sub-calls, %d tokens, %s, %d ms", u.Iterations, u.Subcalls, u.InputTokens+u.OutputTokens, u.CostText(), u.DurationMs)
	}
	return ""
}

// oneLine squeezes s onto one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
