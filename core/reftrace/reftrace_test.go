package reftrace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/traceview"
)

// recordings are real traces written by `rlm run --trace`: the
// examples' transcripts (one with an llm_query, one with four concurrent
// child loops started by rlm_query) and testdata/paths.jsonl (an
// rlm_query past the maximum depth, a budget warning, the turns running
// out and the forced answer; the run of trace/reference.txtar).
func recordings(t *testing.T) map[string][]engine.Event {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "examples")
	out := map[string][]engine.Event{}
	for name, path := range map[string]string{
		"needle":    filepath.Join(root, "needle", "transcript.jsonl"),
		"aggregate": filepath.Join(root, "aggregate", "transcript.jsonl"),
		"paths":     filepath.Join("testdata", "paths.jsonl"),
	} {
		evs, rep, err := traceview.ReadFile(path)
		if err != nil || rep.Incomplete() {
			t.Fatalf("%s: %v %+v", name, err, rep)
		}
		out[name] = evs
	}
	return out
}

func export(t *testing.T, evs []engine.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Export(&b, evs); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func reimport(t *testing.T, data []byte) []engine.Event {
	t.Helper()
	l, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return Import(l)
}

// project is what a trace says, loop by loop, in order: every event,
// without the running totals of intermediate events and the times of events the
// reference does not stamp. A child loop's end is listed apart, by child:
// concurrent children end in any order.
func project(evs []engine.Event) (map[int][]string, map[int]string, string) {
	loops := map[int][]string{}
	ends := map[int]string{}
	var run string
	for _, ev := range evs {
		switch ev.Type {
		case engine.EventRunStart:
			c, _ := json.Marshal(ev.Config)
			x, _ := json.Marshal(ev.Context)
			run += fmt.Sprintf("start %s %q %s %s\n", ev.Time.Truncate(time.Microsecond), ev.Task, c, x)
			continue
		case engine.EventRunEnd:
			u, _ := json.Marshal(ev.Totals)
			run += fmt.Sprintf("end %s %q %q %q %s\n", ev.Time, ev.Answer, ev.Source, ev.Error, u)
			continue
		case engine.EventSubcallEnd:
			ends[*ev.Child] = fmt.Sprintf("%d %q %q %q", ev.Node, ev.Answer, ev.Source, ev.Error)
			continue
		}
		ev.Totals = nil
		ev.Time = ev.Time.Truncate(time.Microsecond) // the reference's precision
		if ev.Type != engine.EventIteration && ev.Type != engine.EventWarning && ev.Type != engine.EventBudgetWarning {
			ev.Time = time.Time{} // not stamped in the reference's log
		}
		b, _ := json.Marshal(ev)
		loops[ev.Node] = append(loops[ev.Node], string(b))
	}
	return loops, ends, run
}

func TestExportImportRoundTrips(t *testing.T) {
	for name, evs := range recordings(t) {
		t.Run(name, func(t *testing.T) {
			first := export(t, evs)
			back := reimport(t, first)
			l1, e1, r1 := project(evs)
			l2, e2, r2 := project(back)
			if r1 != r2 {
				t.Errorf("run differs:\n%s\nimported:\n%s", r1, r2)
			}
			if !reflect.DeepEqual(e1, e2) {
				t.Errorf("child ends differ:\n%v\nimported:\n%v", e1, e2)
			}
			if len(l1) != len(l2) {
				t.Errorf("%d loops, imported %d", len(l1), len(l2))
			}
			for id, want := range l1 {
				got := l2[id]
				for i := range max(len(want), len(got)) {
					var w, g string
					if i < len(want) {
						w = want[i]
					}
					if i < len(got) {
						g = got[i]
					}
					if w != g {
						t.Fatalf("loop %d, event %d:\n  trace:    %s\n  imported: %s", id, i, w, g)
					}
				}
			}
			// What was imported exports to the same log, byte for byte.
			if again := export(t, back); !bytes.Equal(first, again) {
				a, b := strings.Split(string(first), "\n"), strings.Split(string(again), "\n")
				for i := range min(len(a), len(b)) {
					if a[i] != b[i] {
						j := 0
						for j < min(len(a[i]), len(b[i])) && a[i][j] == b[i][j] {
							j++
						}
						t.Errorf("export of the imported trace differs from the first export at line %d, byte %d:\n%.300s\n%.300s", i+1, j, a[i][j:], b[i][j:])
						break
					}
				}
			}
		})
	}
}

// The log has the reference's shape: the metadata line first, one line
// per root iteration numbered from 1, prompts that start with the system
// message, and a child loop's trajectory inside the sub-call that started
// it.
func TestExportHasTheReferenceShape(t *testing.T) {
	evs := recordings(t)["aggregate"]
	lines := strings.Split(strings.TrimSpace(string(export(t, evs))), "\n")
	var meta map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &meta); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "timestamp", "root_model", "max_depth", "max_iterations", "backend", "backend_kwargs", "environment_type", "environment_kwargs", "other_backends"} {
		if _, ok := meta[k]; !ok {
			t.Errorf("metadata has no %q", k)
		}
	}
	if meta["type"] != "metadata" || meta["max_depth"] != float64(2) {
		t.Errorf("metadata: type %v, max_depth %v (rlm's max depth 1 is the reference's 2)", meta["type"], meta["max_depth"])
	}
	children := 0
	for i, l := range lines[1:] {
		var it Iteration
		if err := json.Unmarshal([]byte(l), &it); err != nil {
			t.Fatal(err)
		}
		if it.Type != "iteration" || it.Iteration != i+1 || it.Prompt[0].Role != "system" || it.Timestamp == "" {
			t.Errorf("line %d: type %q, iteration %d, first role %q", i+2, it.Type, it.Iteration, it.Prompt[0].Role)
		}
		for _, b := range it.CodeBlocks {
			for _, c := range b.Result.RLMCalls {
				if c.Metadata != nil && len(c.Metadata.Iterations) > 0 {
					children++
				}
			}
		}
	}
	if children != 4 {
		t.Errorf("%d child trajectories, want 4", children)
	}
}

func TestReadRefusesWhatIsNotALog(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "the log is empty"},
		{"{\"type\":\"metadata\"}\nnot json\n", "line 2 is not JSON"},
		{"{\"type\":\"iteration\",\"prompt\":5}\n", "line 1: not a reference iteration"},
		{"{\"type\":\"iteration\",\"code_blocks\":{}}\n", "line 1: not a reference iteration"},
	} {
		_, err := Read(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
	}
}

// A log the reference wrote with a plain string prompt (its types allow
// one) imports as one user message; a [kind, answer] final answer (older
// logs) as its answer.
func TestImportTakesTheReferencesOtherShapes(t *testing.T) {
	log := `{"type":"iteration","iteration":1,"timestamp":"2026-05-01T10:00:01.5","prompt":"What is 2+2?","response":"4","code_blocks":[],"final_answer":["FINAL","4"],"iteration_time":0.5}`
	l, err := Read(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	evs := Import(l)
	var got []string
	for _, ev := range evs {
		s := ev.Type
		if ev.Request != nil {
			s += fmt.Sprintf(" %v", ev.Request.Messages)
		}
		if ev.Answer != "" {
			s += " " + ev.Answer + " " + ev.Source
		}
		got = append(got, s)
	}
	want := "run_start|iteration|llm_call [{user What is 2+2?}]|final 4 final|run_end 4 final"
	if strings.Join(got, "|") != want {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "|"), want)
	}
}

// A reference log of today's protocol ends with a code block setting
// answer["ready"]; its import says so (answer_source answer, as an rlm run
// finished the same way records), not FINAL, which that log never used.
func TestImportReadsTheAnswerDict(t *testing.T) {
	log := `{"type":"metadata","timestamp":"2026-06-25T10:00:00","root_model":"m","max_depth":1,"max_iterations":5,"backend":"openai"}
{"type":"iteration","iteration":1,"timestamp":"2026-06-25T10:00:01","prompt":[{"role":"user","content":"What is 6*7?"}],"response":"` + "```repl\\\\nanswer[\\\"content\\\"] = str(6*7)\\\\nanswer[\\\"ready\\\"] = True\\\\n```" + `","code_blocks":[{"code":"answer[\"content\"] = str(6*7)\nanswer[\"ready\"] = True","result":{"stdout":"","stderr":"","locals":{},"execution_time":0.01,"rlm_calls":[]}}],"final_answer":"42","iteration_time":0.2}`
	l, err := Read(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	evs := Import(l)
	end := evs[len(evs)-1]
	if end.Type != engine.EventRunEnd || end.Answer != "42" || end.Source != engine.SourceAnswer {
		t.Errorf("run_end = %s %q source %q, want run_end \"42\" source %q", end.Type, end.Answer, end.Source, engine.SourceAnswer)
	}
	for _, ev := range evs {
		if ev.Type == engine.EventFinal && ev.Source != engine.SourceAnswer {
			t.Errorf("final event source %q, want %q", ev.Source, engine.SourceAnswer)
		}
	}
}
