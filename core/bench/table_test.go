package bench

import (
	"bytes"
	"strings"
	"testing"
)

// Rows are means of the scores and totals of the usage, per family and
// size in the order first seen; failures, cut contexts and unknown prices
// are said.
func TestSummarizeAndPrint(t *testing.T) {
	task := func(f string, size int) Task { return Task{Family: f, Size: size} }
	outs := []Outcome{
		{Task: task(SNIAH, 8192), RLM: Attempt{Score: 1, Calls: 2, InputTokens: 100, OutputTokens: 10, CostUSD: 0.01},
			Baseline: &Attempt{Score: 1, Calls: 1, InputTokens: 50, OutputTokens: 5, CostUSD: 0.002}},
		{Task: task(SNIAH, 8192), RLM: Attempt{Error: "budget", Calls: 1, InputTokens: 10, OutputTokens: 1, CostUSD: 0.001},
			Baseline: &Attempt{Score: 0.5, Calls: 1, InputTokens: 50, OutputTokens: 5, CostUSD: 0.002, Cut: 10}},
		{Task: task(Pairs, 1<<20), RLM: Attempt{Score: 0.25, Calls: 3, InputTokens: 300, OutputTokens: 30, Unpriced: true},
			Baseline: &Attempt{Error: "provider down"}},
	}
	rows := Summarize(outs)
	if len(rows) != 2 || rows[0].Family != SNIAH || rows[0].Tasks != 2 || rows[0].RLMScore != 0.5 || rows[0].BaselineScore != 0.75 ||
		rows[0].RLMFailed != 1 || rows[0].RLMCalls != 3 || rows[0].RLMTokens != 121 || rows[0].BaselineCutTasks != 1 {
		t.Fatalf("rows: %+v", rows)
	}
	var b bytes.Buffer
	if err := PrintTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	want := [][]string{
		{"family", "size", "tasks", "RLM", "score", "baseline", "score", "RLM", "calls", "RLM", "tokens", "RLM", "cost", "baseline", "tokens", "baseline", "cost"},
		{"sniah", "8K", "2", "0.500", "(1", "failed)", "0.750", "cut", "3", "121", "$0.0110", "110", "$0.0040"},
		{"pairs", "1M", "1", "0.250", "0.000", "(1", "failed)", "3", "330", "$0.0000+?", "0", "$0.0000+?"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d: %q, want %q", i, lines[i], strings.Join(w, " "))
		}
	}
	// Without a baseline its columns say so.
	b.Reset()
	PrintTable(&b, Summarize([]Outcome{{Task: task(Oolong, 65536), RLM: Attempt{Score: 1}}}))
	if got := strings.Fields(strings.Split(b.String(), "\n")[1]); strings.Join(got, " ") != "oolong 64K 1 1.000 - 0 0 $0.0000 - -" {
		t.Errorf("no baseline:\n%s", b.String())
	}
}
