package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

// execute runs one block and returns what the model is shown and whether
// the block failed.
func (n *node) execute(it, block int, code string) (string, bool, error) {
	res, err := n.sess.Execute(n.ctx, code, n.r.o.CellLimits.Wall)
	if err != nil {
		if n.ctx.Err() != nil {
			return "", false, n.ctx.Err()
		}
		return "", false, &failure{kind: ErrSandbox, msg: fmt.Sprintf("running a code block (depth %d, iteration %d)", n.depth, it), err: err}
	}
	if res.StateLost {
		// The restarted REPL has its helpers and context again, but not
		// the tools, the protocol nor the named inputs' variables.
		if err := n.loadTools(); err != nil {
			return "", false, err
		}
		if err := n.setProtocol(); err != nil {
			return "", false, err
		}
		if err := n.bindVars(); err != nil {
			return "", false, err
		}
	}
	out, failed := formatResult(res, n.r.o.MaxOutputChars)
	n.emit(Event{Type: EventCode, Iteration: it, Block: block, Code: code, Output: out, Result: &CodeResult{
		EndedBy: res.EndedBy, Error: res.Error, DurationMs: res.DurationMs, TimedOut: res.TimedOut,
		StateLost: res.StateLost, Truncated: res.Truncated,
	}})
	return out, failed, nil
}

// formatResult renders a cell's result for the model.
func formatResult(res *core.Result, max int) (string, bool) {
	var b strings.Builder
	b.WriteString(res.Stdout)
	if res.StdoutOmitted > 0 {
		fmt.Fprintf(&b, "\n[the sandbox kept only part of the output: %d bytes omitted]\n", res.StdoutOmitted)
	}
	if res.Stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n")
		b.WriteString(res.Stderr)
	}
	failed := false
	switch {
	case res.TimedOut:
		failed = true
		fmt.Fprintf(&b, "\n[error] the block was stopped after %s: it ran out of time.", time.Duration(res.DurationMs)*time.Millisecond)
		if res.StateLost {
			b.WriteString(" The REPL was restarted: every variable is gone except context and the helpers.")
		} else {
			b.WriteString(" Variables set before it are kept.")
		}
		b.WriteString(" Make the code faster or work on smaller pieces.")
	case res.Error != "":
		failed = true
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[error] ")
		b.WriteString(res.Error)
		if res.StateLost {
			b.WriteString("\nThe REPL was restarted: every variable is gone except context and the helpers.")
		}
	case res.EndedBy != "" && res.EndedBy != ending.Exit:
		failed = true
		fmt.Fprintf(&b, "\n[error] the block ended by %s", res.EndedBy)
	}
	s := strings.TrimRight(b.String(), "\n")
	if s == "" {
		s = "(no output)"
	}
	return Truncate(s, max), failed
}

// variable reads a FINAL_VAR: a string as is, anything else as JSON.
func (n *node) variable(name string) (string, bool, error) {
	raw, found, err := n.sess.Variable(n.ctx, name)
	if err != nil {
		if n.ctx.Err() != nil {
			return "", false, n.ctx.Err()
		}
		return "", false, &failure{kind: ErrSandbox, msg: fmt.Sprintf("reading variable %s (depth %d)", name, n.depth), err: err}
	}
	if !found {
		return "", false, nil
	}
	return jsonText(raw), true, nil
}
