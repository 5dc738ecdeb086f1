package traceview

import (
	"errors"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core/engine"
)

func scan(t *testing.T, s string) ([]engine.Event, Report, error) {
	t.Helper()
	var evs []engine.Event
	rep, err := Scan(strings.NewReader(s), "t.jsonl", func(ev engine.Event) { evs = append(evs, ev) })
	return evs, rep, err
}

const (
	start = `{"type":"run_start","node":0,"depth":0,"task":"count"}` + "\n"
	iter1 = `{"type":"iteration","node":0,"depth":0,"iteration":1}` + "\n"
	end   = `{"type":"run_end","node":0,"depth":0,"answer":"42","source":"final"}` + "\n"
)

func TestScanComplete(t *testing.T) {
	evs, rep, err := scan(t, start+"\n"+iter1+end)
	if err != nil || len(evs) != 3 || rep.Incomplete() || len(rep.Notes()) != 0 || rep.Lines != 4 {
		t.Fatalf("evs %d, rep %+v, err %v", len(evs), rep, err)
	}
}

func TestScanCutLastLine(t *testing.T) {
	evs, rep, err := scan(t, start+iter1+`{"type":"llm_call","node":0,"respo`)
	if err != nil || len(evs) != 2 || !rep.Cut || rep.Bad != 0 || rep.Ended {
		t.Fatalf("evs %d, rep %+v, err %v", len(evs), rep, err)
	}
	notes := strings.Join(rep.Notes(), "\n")
	for _, want := range []string{"the last line (3) is cut short", "the trace ends before the run did"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
}

func TestScanMalformedMiddle(t *testing.T) {
	evs, rep, err := scan(t, start+"{oops\n"+`{"no":"type"}`+"\n"+iter1+end)
	if err != nil || len(evs) != 3 || rep.Cut || rep.Bad != 2 || !rep.Ended || !rep.Incomplete() {
		t.Fatalf("evs %d, rep %+v, err %v", len(evs), rep, err)
	}
	if rep.Skipped[0].Line != 2 || !strings.Contains(rep.Skipped[0].Err, "invalid JSON") ||
		rep.Skipped[1].Line != 3 || !strings.Contains(rep.Skipped[1].Err, `no "type"`) {
		t.Errorf("skipped: %+v", rep.Skipped)
	}
}

// A complete last line without its newline is an event, not a cut.
func TestScanLastLineWithoutNewline(t *testing.T) {
	evs, rep, err := scan(t, start+strings.TrimSuffix(end, "\n"))
	if err != nil || len(evs) != 2 || rep.Incomplete() {
		t.Fatalf("evs %d, rep %+v, err %v", len(evs), rep, err)
	}
}

func TestScanNotATrace(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "t.jsonl is not an rlm trace (it is empty)",
		"\n\n":                       "(it is empty)",
		"task = \"x\"\n":             "(line 1: invalid JSON at byte",
		`{"a":1}` + "\n":             `(line 1: not a trace event: no "type")`,
		`{"type":"run_st`:            "(its only line is cut short)",
		"[1,2]\n" + `{"a":1}` + "\n": "(line 1: not a trace event",
	} {
		_, _, err := scan(t, in)
		if !errors.Is(err, ErrNotTrace) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "rlm run --trace FILE") {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

func TestScanBoundsSkipped(t *testing.T) {
	in := start + strings.Repeat("nope\n", 50) + end
	_, rep, err := scan(t, in)
	if err != nil || rep.Bad != 50 || len(rep.Skipped) != maxProblems || !strings.HasSuffix(rep.Notes()[0], "; …") {
		t.Fatalf("rep %+v, err %v", rep, err)
	}
}

// A line far longer than a bufio.Scanner's default buffer still reads.
func TestScanLongLine(t *testing.T) {
	long := `{"type":"code","node":0,"depth":0,"iteration":1,"block":1,"output":"` + strings.Repeat("x", 70<<20) + `"}` + "\n"
	evs, rep, err := scan(t, start+iter1+long+end)
	if err != nil || len(evs) != 4 || rep.Incomplete() || len(evs[2].Output) != 70<<20 {
		t.Fatalf("evs %d, rep %+v, err %v", len(evs), rep, err)
	}
}

func TestReadFileMissing(t *testing.T) {
	_, _, err := ReadFile("/nonexistent/run.jsonl")
	if err == nil || !strings.Contains(err.Error(), "write one with rlm run TASK --trace /nonexistent/run.jsonl") {
		t.Fatal(err)
	}
}
