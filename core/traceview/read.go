// Package traceview reads the traces `rlm run --trace` writes and renders
// them as one self-contained HTML page.
//
// # Notes
//
// Reading is tolerant on purpose: a trace is written line by line while a
// run goes, so a run that was killed (Ctrl-C, OOM, a full disk) leaves a
// trace whose last line is cut short, and a hand-edited or concatenated
// file may hold a bad line in the middle. Both are the traces people most
// need to look at, so [Scan] skips what it cannot read and reports it
// instead of refusing the whole file. Only a file with no trace event at
// all is an error.
//
// The page is one file with its CSS, JavaScript and data inline (no
// network, a Content-Security-Policy that forbids it), so it opens from
// disk and can be attached to a bug report. The trace is reduced to what
// the page shows before it is embedded: a model request repeats the whole
// conversation so far, which would make a long run's page quadratic in
// size, so only the replies, the code, the outputs and the sub-calls'
// prompts are kept, each capped (see [MaxText]).
package traceview

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/rlmkit/rlm/core/engine"
)

// ErrNotTrace is matched by the error of a file holding no trace event.
var ErrNotTrace = errors.New("not an rlm trace")

// Problem is a line that could not be read as a trace event.
type Problem struct {
	Line int    `json:"line"`
	Err  string `json:"error"`
}

// maxProblems bounds the problems a Report lists (the rest are counted).
const maxProblems = 20

// Report says how much of a trace was read.
type Report struct {
	Lines  int // lines read, blank ones included
	Events int // events read
	// Skipped lists malformed lines that were skipped (at most 20; Bad
	// counts them all). A cut last line is not among them.
	Skipped []Problem
	Bad     int
	// Cut is set when the last line ends without a newline and is not
	// valid JSON: the writer stopped in the middle of it.
	Cut bool
	// Ended is set when the trace holds the run's end (run_end).
	Ended bool
}

// Incomplete says whether the trace lacks part of its run.
func (r Report) Incomplete() bool { return r.Cut || r.Bad > 0 || !r.Ended }

// Notes are sentences saying why the trace is incomplete (none when it
// is complete).
func (r Report) Notes() []string {
	var n []string
	if r.Cut {
		n = append(n, fmt.Sprintf("the last line (%d) is cut short: the run was stopped while writing it", r.Lines))
	}
	if r.Bad > 0 {
		s := fmt.Sprintf("%d malformed line(s) skipped", r.Bad)
		for i, p := range r.Skipped {
			if i == 0 {
				s += ": "
			} else {
				s += "; "
			}
			s += fmt.Sprintf("line %d (%s)", p.Line, p.Err)
		}
		if r.Bad > len(r.Skipped) {
			s += "; …"
		}
		n = append(n, s)
	}
	if !r.Ended {
		n = append(n, "the trace ends before the run did (no run_end event): what follows is the run up to that point")
	}
	return n
}

// Scan reads a JSONL trace from rd and calls fn with each event in order.
// Lines that are not trace events are skipped and reported; the error is
// an I/O error, or [ErrNotTrace] when no line was a trace event. name is
// the file's name for messages.
func Scan(rd io.Reader, name string, fn func(engine.Event)) (Report, error) {
	var rep Report
	var first *Problem
	br := bufio.NewReaderSize(rd, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			rep.Lines++
			last := err == io.EOF && line[len(line)-1] != '\n'
			t := bytes.TrimSpace(line)
			if len(t) > 0 {
				ev, perr := parseEvent(t)
				switch {
				case perr == nil:
					rep.Events++
					if ev.Type == engine.EventRunEnd {
						rep.Ended = true
					}
					fn(ev)
				case last && !json.Valid(t):
					rep.Cut = true
				default:
					rep.Bad++
					p := Problem{Line: rep.Lines, Err: perr.Error()}
					if first == nil {
						first = &p
					}
					if len(rep.Skipped) < maxProblems {
						rep.Skipped = append(rep.Skipped, p)
					}
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return rep, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	if rep.Events == 0 {
		why := "it is empty"
		switch {
		case first != nil:
			why = fmt.Sprintf("line %d: %s", first.Line, first.Err)
		case rep.Cut:
			why = "its only line is cut short"
		}
		return rep, fmt.Errorf("%s is %w (%s); traces are written by rlm run --trace FILE", name, ErrNotTrace, why)
	}
	return rep, nil
}

// parseEvent reads one line; an event must be a JSON object with a type.
func parseEvent(b []byte) (engine.Event, error) {
	var ev engine.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return ev, fmt.Errorf("invalid JSON at byte %d", se.Offset)
		}
		return ev, fmt.Errorf("not a trace event: %v", err)
	}
	if ev.Type == "" {
		return ev, errors.New(`not a trace event: no "type"`)
	}
	return ev, nil
}

// ReadFile reads a whole trace file.
func ReadFile(path string) ([]engine.Event, Report, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Report{}, fmt.Errorf("cannot read the trace: %w (write one with rlm run TASK --trace %s)", err, path)
	}
	if err != nil {
		return nil, Report{}, fmt.Errorf("cannot read the trace: %w", err)
	}
	defer f.Close()
	var evs []engine.Event
	rep, err := Scan(f, path, func(ev engine.Event) { evs = append(evs, ev) })
	if err != nil {
		return nil, rep, err
	}
	return evs, rep, nil
}
