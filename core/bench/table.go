package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Row sums up the tasks of one family at one size.
type Row struct {
	Family string `json:"family"`
	Size   int    `json:"size"`
	Tasks  int    `json:"tasks"`
	// Scores are means over the tasks, in [0, 1].
	RLMScore      float64 `json:"rlm_score"`
	BaselineScore float64 `json:"baseline_score"`
	// RLMFailed counts loops that ended without an answer (scored 0).
	RLMFailed int `json:"rlm_failed"`
	// Calls, tokens and cost are totals over the tasks.
	RLMCalls          int     `json:"rlm_calls"`
	RLMTokens         int64   `json:"rlm_tokens"`
	RLMCostUSD        float64 `json:"rlm_cost_usd"`
	BaselineTokens    int64   `json:"baseline_tokens"`
	BaselineCostUSD   float64 `json:"baseline_cost_usd"`
	BaselineFailed    int     `json:"baseline_failed"`
	BaselineCutTasks  int     `json:"baseline_cut_tasks"` // tasks whose context did not fit the window
	Unpriced          bool    `json:"unpriced,omitempty"` // some call had no known price
	baselineAttempted bool
}

// Summarize groups outcomes by family and size, in the order first seen.
func Summarize(outs []Outcome) []Row {
	var rows []*Row
	index := map[string]*Row{}
	for _, o := range outs {
		key := fmt.Sprint(o.Task.Family, o.Task.Size)
		row := index[key]
		if row == nil {
			row = &Row{Family: o.Task.Family, Size: o.Task.Size}
			index[key] = row
			rows = append(rows, row)
		}
		row.Tasks++
		row.RLMScore += o.RLM.Score
		if o.RLM.Error != "" {
			row.RLMFailed++
		}
		row.RLMCalls += o.RLM.Calls
		row.RLMTokens += o.RLM.InputTokens + o.RLM.OutputTokens
		row.RLMCostUSD += o.RLM.CostUSD
		row.Unpriced = row.Unpriced || o.RLM.Unpriced
		if b := o.Baseline; b != nil {
			row.baselineAttempted = true
			row.BaselineScore += b.Score
			row.BaselineTokens += b.InputTokens + b.OutputTokens
			row.BaselineCostUSD += b.CostUSD
			row.Unpriced = row.Unpriced || b.Unpriced
			if b.Error != "" {
				row.BaselineFailed++
			}
			if b.Cut > 0 {
				row.BaselineCutTasks++
			}
		}
	}
	out := make([]Row, len(rows))
	for i, r := range rows {
		r.RLMScore /= float64(r.Tasks)
		r.BaselineScore /= float64(r.Tasks)
		out[i] = *r
	}
	return out
}

// PrintTable writes rows as an aligned table. A score is a mean in
// [0, 1]; "(n failed)" counts runs that ended without an answer; a
// baseline marked "cut" did not get the whole context for some tasks.
func PrintTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "family\tsize\ttasks\tRLM score\tbaseline score\tRLM calls\tRLM tokens\tRLM cost\tbaseline tokens\tbaseline cost\t")
	for _, r := range rows {
		rlm := fmt.Sprintf("%.3f", r.RLMScore)
		if r.RLMFailed > 0 {
			rlm += fmt.Sprintf(" (%d failed)", r.RLMFailed)
		}
		base, btok, bcost := "-", "-", "-"
		if r.baselineAttempted {
			base = fmt.Sprintf("%.3f", r.BaselineScore)
			if r.BaselineFailed > 0 {
				base += fmt.Sprintf(" (%d failed)", r.BaselineFailed)
			}
			if r.BaselineCutTasks > 0 {
				base += " cut"
			}
			btok, bcost = fmt.Sprint(r.BaselineTokens), usd(r.BaselineCostUSD, r.Unpriced)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", r.Family, SizeText(r.Size), r.Tasks, rlm, base,
			r.RLMCalls, r.RLMTokens, usd(r.RLMCostUSD, r.Unpriced), btok, bcost)
	}
	return tw.Flush()
}

func usd(v float64, unpriced bool) string {
	s := fmt.Sprintf("$%.4f", v)
	if unpriced {
		s += "+?"
	}
	return s
}

// SizeText writes a size in characters the way --sizes reads it: 8K is
// 8192, 1M is 1048576.
func SizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

// ParseSize reads a size: a number of characters, with K (×1024) or M
// (×1048576), or 2^N.
func ParseSize(s string) (int, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1
	var n int
	switch {
	case strings.HasPrefix(t, "2^"):
		var e int
		if _, err := fmt.Sscanf(t[2:], "%d", &e); err != nil || e < 10 || e > 30 || fmt.Sprint(e) != t[2:] {
			return 0, fmt.Errorf("size %q: write 2^N with N from 10 to 30", s)
		}
		return 1 << e, nil
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, strings.TrimSuffix(t, "K")
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, strings.TrimSuffix(t, "M")
	}
	if _, err := fmt.Sscanf(t, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != t {
		return 0, fmt.Errorf("size %q: give characters as a number, with K or M (8K, 1M), or 2^N", s)
	}
	if n > (1<<30)/mult {
		return 0, fmt.Errorf("size %q is over 1G characters", s)
	}
	return n * mult, nil
}
