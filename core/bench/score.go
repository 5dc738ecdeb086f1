package bench

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Score is the paper's score of reply for t, in [0, 1]: exact match for
// S-NIAH and OOLONG's label questions, 0.75^|Δ| for OOLONG's counts, F1
// over the pairs for OOLONG-Pairs.
func Score(t Task, reply string) float64 {
	switch t.Kind {
	case KindNumeric:
		want, _ := strconv.Atoi(t.Answer)
		return NumericScore(want, reply)
	case KindPairs:
		return PairsF1(ParsePairs(t.Answer), ParsePairs(reply))
	}
	return ExactMatch(t.Answer, reply)
}

// ExactMatch is 1 when reply, normalised, is answer normalised: case,
// surrounding quotes and punctuation, a "label:"/"answer:" prefix and
// runs of spaces do not count; anything else does.
func ExactMatch(answer, reply string) float64 {
	if normalize(reply) == normalize(answer) {
		return 1
	}
	return 0
}

var prefixRe = regexp.MustCompile(`^(the )?(final )?(answer|label)( is)?\s*[:=-]?\s*`)

func normalize(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	s = prefixRe.ReplaceAllString(s, "")
	return strings.Trim(s, " .,;:!\"'`*()[]")
}

var intRe = regexp.MustCompile(`-?\d[\d,]*`)

// NumericScore is 0.75^|want - got| for the first integer in reply (0
// when it has none): an answer off by one scores 0.75, by two 0.5625.
func NumericScore(want int, reply string) float64 {
	m := intRe.FindString(reply)
	if m == "" {
		return 0
	}
	got, err := strconv.Atoi(strings.ReplaceAll(m, ",", ""))
	if err != nil {
		return 0
	}
	return math.Pow(0.75, math.Abs(float64(want-got)))
}

var pairRe = regexp.MustCompile(`(\d+)\s*[,;&/-]\s*(\d+)`)

// ParsePairs reads the pairs of numbers in s ("(12, 34)", "12,34", one
// or several a line), each as "A,B" with A <= B, without duplicates.
func ParsePairs(s string) map[string]bool {
	out := map[string]bool{}
	for _, m := range pairRe.FindAllStringSubmatch(s, -1) {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		out[pairText(a, b)] = true
	}
	return out
}

// PairsF1 is the F1 of got against want: 1 when both are empty.
func PairsF1(want, got map[string]bool) float64 {
	if len(want) == 0 && len(got) == 0 {
		return 1
	}
	hit := 0
	for p := range got {
		if want[p] {
			hit++
		}
	}
	if hit == 0 {
		return 0
	}
	prec := float64(hit) / float64(len(got))
	rec := float64(hit) / float64(len(want))
	return 2 * prec * rec / (prec + rec)
}
