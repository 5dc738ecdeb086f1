package bench

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var sizes = []int{1 << 13, 1 << 16, 1 << 20}

// The same (family, size, index, seed) gives the same task, byte for
// byte; another seed or index gives another.
func TestGenerateIsDeterministic(t *testing.T) {
	for _, f := range Families {
		for _, size := range sizes {
			a, err := Generate(f, size, 0, 7)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Generate(f, size, 0, 7)
			if a.Context != b.Context || a.Question != b.Question || a.Answer != b.Answer {
				t.Errorf("%s at %d: two generations differ", f, size)
			}
			c, _ := Generate(f, size, 0, 8)
			d, _ := Generate(f, size, 1, 7)
			if c.Context == a.Context || d.Context == a.Context {
				t.Errorf("%s at %d: another seed or index gives the same context", f, size)
			}
			if n := len(a.Context); n < size*9/10 || n > size+size/10 {
				t.Errorf("%s at %d: context of %d characters", f, size, n)
			}
		}
	}
	if _, err := Generate("ruler", 8192, 0, 1); err == nil || !strings.Contains(err.Error(), "use sniah, oolong, pairs") {
		t.Errorf("unknown family: %v", err)
	}
	if _, err := Generate(SNIAH, 100, 0, 1); err == nil {
		t.Error("a 100-character context was generated")
	}
}

// The needle is in the haystack once, and the question names its key.
func TestSNIAHHidesOneNeedle(t *testing.T) {
	re := regexp.MustCompile(`One of the special magic numbers for (\S+) is: (\d+)\.`)
	depths := map[int]bool{}
	for i := range 8 {
		task, _ := Generate(SNIAH, 1<<16, i, 1)
		m := re.FindAllStringSubmatchIndex(task.Context, -1)
		if len(m) != 1 {
			t.Fatalf("task %d: %d needles", i, len(m))
		}
		key := task.Context[m[0][2]:m[0][3]]
		if got := task.Context[m[0][4]:m[0][5]]; got != task.Answer || !strings.Contains(task.Question, key) {
			t.Errorf("task %d: needle %s for %s, answer %s, question %q", i, got, key, task.Answer, task.Question)
		}
		depths[m[0][0]*10/len(task.Context)] = true
	}
	if len(depths) < 3 {
		t.Errorf("the needles sit at %d depth deciles of 10 over 8 tasks", len(depths))
	}
}

// labelOf classifies an instance by finding the template it was made
// from: the context says nothing else about its label.
func labelOf(inst string) string {
	for l, ts := range questionTemplates {
		for _, tpl := range ts {
			for _, b := range blanks[l] {
				if fmt.Sprintf(tpl, b) == inst {
					return l
				}
			}
		}
	}
	return ""
}

var lineRe = regexp.MustCompile(`(?m)^Date: .* \|\| User: (\d+) \|\| Instance: (.*)$`)

func records(t *testing.T, ctx string) []record {
	var out []record
	for _, m := range lineRe.FindAllStringSubmatch(ctx, -1) {
		l := labelOf(m[2])
		if l == "" {
			t.Fatalf("instance %q has no label", m[2])
		}
		u, _ := strconv.Atoi(m[1])
		out = append(out, record{u, l})
	}
	if n := strings.Count(ctx, "\n"); n != len(out) {
		t.Fatalf("%d lines, %d records", n, len(out))
	}
	return out
}

// An OOLONG answer is what counting the context's labels gives.
func TestOolongAnswersAgreeWithTheContext(t *testing.T) {
	kinds := map[string]bool{}
	for i := range 9 {
		task, _ := Generate(Oolong, 1<<15, i, 3)
		count := map[string]int{}
		for _, r := range records(t, task.Context) {
			count[r.label]++
		}
		q := task.Question
		switch {
		case strings.Contains(q, "How many"):
			kinds["count"] = true
			l := regexp.MustCompile(`label '([^']+)'`).FindStringSubmatch(q[len(linesPrompt):])[1]
			if task.Answer != fmt.Sprint(count[l]) || task.Kind != KindNumeric {
				t.Errorf("task %d: %s has %d, answer %s", i, l, count[l], task.Answer)
			}
		case strings.Contains(q, "most common"):
			kinds["top"] = true
			top := slices.MaxFunc(Labels, func(a, b string) int { return count[a] - count[b] })
			for _, l := range Labels {
				if l != top && count[l] == count[top] {
					t.Errorf("task %d: %s and %s tie", i, l, top)
				}
			}
			if task.Answer != top {
				t.Errorf("task %d: most common %s, answer %s", i, top, task.Answer)
			}
		default:
			kinds["compare"] = true
			m := regexp.MustCompile(`label '([^']+)' more common, less common, or the same frequency as label '([^']+)'`).FindStringSubmatch(q)
			want := map[bool]string{true: "more common than", false: "less common than"}[count[m[1]] > count[m[2]]]
			if count[m[1]] == count[m[2]] {
				want = "same frequency as"
			}
			if task.Answer != want {
				t.Errorf("task %d: %s %d vs %s %d, answer %s", i, m[1], count[m[1]], m[2], count[m[2]], task.Answer)
			}
		}
	}
	if len(kinds) != 3 {
		t.Errorf("9 tasks asked %d kinds of question", len(kinds))
	}
}

// An OOLONG-Pairs answer is every pair the condition holds for.
func TestPairsAnswersAgreeWithTheContext(t *testing.T) {
	for i := range 6 {
		task, _ := Generate(Pairs, 1<<15, i, 5)
		has := map[int]map[string]bool{}
		for _, r := range records(t, task.Context) {
			if has[r.user] == nil {
				has[r.user] = map[string]bool{}
			}
			has[r.user][r.label] = true
		}
		ls := regexp.MustCompile(`label '([^']+)'`).FindAllStringSubmatch(task.Question[len(linesPrompt):], -1)
		var users []int
		for u := range has {
			users = append(users, u)
		}
		slices.Sort(users)
		var want []string
		for x, u := range users {
			for _, v := range users[x+1:] {
				ok := has[u][ls[0][1]] && has[v][ls[0][1]]
				if len(ls) == 2 {
					a, c := ls[0][1], ls[1][1]
					ok = has[u][a] && has[v][c] || has[u][c] && has[v][a]
				}
				if ok {
					want = append(want, pairText(u, v))
				}
			}
		}
		slices.Sort(want)
		if got := strings.Join(want, "\n"); got != task.Answer || len(want) < 3 {
			t.Errorf("task %d: the context gives %d pairs:\n%s\nthe answer:\n%s", i, len(want), got, task.Answer)
		}
	}
}

func TestScorers(t *testing.T) {
	num := Task{Kind: KindNumeric, Answer: "40"}
	for reply, want := range map[string]float64{"40": 1, "41": 0.75, "There are 38 of them.": 0.5625, "none": 0, "1,040": math.Pow(0.75, 1000)} {
		if got := Score(num, reply); math.Abs(got-want) > 1e-12 {
			t.Errorf("numeric 40, reply %q: %v, want %v", reply, got, want)
		}
	}
	ex := Task{Kind: KindExact, Answer: "human being"}
	for reply, want := range map[string]float64{"human being": 1, " Human  Being. ": 1, "Answer: human being": 1, "'human being'": 1, "human": 0, "human beings": 0} {
		if got := Score(ex, reply); got != want {
			t.Errorf("exact, reply %q: %v, want %v", reply, got, want)
		}
	}
	pr := Task{Kind: KindPairs, Answer: "1,2\n1,3\n2,3\n3,4"}
	for reply, want := range map[string]float64{
		"(1, 2)\n(1, 3)\n(2, 3)\n(3, 4)":  1,
		"(2, 1) (3, 1) (3,2) (4,3) (2,1)": 1,       // order and duplicates do not count
		"(1, 2)\n(1, 3)":                  2.0 / 3, // precision 1, recall 1/2
		"(1, 2)\n(5, 6)":                  1.0 / 3, // precision 1/2, recall 1/4
		"no pairs":                        0,
	} {
		if got := Score(pr, reply); math.Abs(got-want) > 1e-12 {
			t.Errorf("pairs, reply %q: %v, want %v", reply, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"8K": 8192, "1m": 1 << 20, "2^13": 8192, "5000": 5000} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
	for _, in := range []string{"", "8X", "2^40", "-3", "1.5K"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("%q was accepted", in)
		}
	}
	if SizeText(1<<20) != "1M" || SizeText(8192) != "8K" || SizeText(5000) != "5000" {
		t.Error("SizeText")
	}
}

func TestBaselinePromptIsCutToTheWindow(t *testing.T) {
	task, _ := Generate(SNIAH, 1<<14, 0, 1)
	p, cut := BaselinePrompt(task, 1000)
	if cut != len(task.Context)-1000 || !strings.Contains(p, task.Context[:1000]) || strings.Contains(p, task.Context[:1001]) || !strings.HasSuffix(p, task.Question) {
		t.Errorf("cut %d of %d", cut, len(task.Context))
	}
	if p, cut := BaselinePrompt(task, 0); cut != 0 || !strings.Contains(p, task.Context) {
		t.Error("window 0 cut the context")
	}
}
