// Package bench generates the long-context task families of the
// Recursive Language Models paper (Zhang, Kraska, Khattab, arXiv
// 2512.24601, §3) offline and deterministically, scores answers the way
// the paper does, and runs tasks through the RLM loop and through a
// no-REPL baseline (the same model given the context directly, cut to its
// window) so the two can be compared. `rlm bench` is its command.
//
// # The families
//
//   - S-NIAH (single needle in a haystack, after RULER's niah_single): one
//     sentence "One of the special magic numbers for KEY is: N." hidden at
//     a random depth of filler prose; the question asks for KEY's number.
//     Constant work whatever the size. Scored by exact match.
//   - OOLONG (after its trec_coarse split): lines "Date: … || User: … ||
//     Instance: QUESTION", each question belonging to one of six coarse
//     labels that are not written down (the model must classify every
//     line: work linear in the size); the task asks how many lines have a
//     label (scored 0.75^|Δ|), which label is the most common, or how two
//     labels compare (exact match).
//   - OOLONG-Pairs: the same lines; the task asks for every pair of users
//     meeting a condition on their lines' labels (quadratic in the users).
//     Scored by F1 over the pairs listed.
//
// A task is a function of (family, size, index, seed) only: math/rand/v2's
// PCG is a specified algorithm, so every machine and Go version generates
// the same bytes.
package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Families, in the order they are run and printed.
const (
	SNIAH  = "sniah"
	Oolong = "oolong"
	Pairs  = "pairs"
)

// Families lists every family.
var Families = []string{SNIAH, Oolong, Pairs}

// Kinds of answer, which decide the scorer.
const (
	KindExact   = "exact"   // exact match after normalisation
	KindNumeric = "numeric" // 0.75^|Δ|
	KindPairs   = "pairs"   // F1 over unordered pairs
)

// Task is one generated question about one generated context.
type Task struct {
	ID       string `json:"id"`
	Family   string `json:"family"`
	Size     int    `json:"size"` // the context's target length in characters
	Index    int    `json:"index"`
	Question string `json:"question"`
	Context  string `json:"-"`
	Kind     string `json:"kind"`
	// Answer is the expected answer: the text for exact, the number for
	// numeric, one "A,B" line per pair (A < B) for pairs.
	Answer string `json:"answer"`
}

// Generate returns task index of family at size characters.
func Generate(family string, size, index int, seed uint64) (Task, error) {
	if size < 1024 {
		return Task{}, fmt.Errorf("size %d is too small: the smallest context is 1024 characters", size)
	}
	r := rand.New(rand.NewPCG(seed, uint64(familyNumber(family))<<56^uint64(size)<<16^uint64(index)))
	t := Task{ID: fmt.Sprintf("%s-%d-%d", family, size, index), Family: family, Size: size, Index: index}
	switch family {
	case SNIAH:
		sniah(r, &t)
	case Oolong:
		oolong(r, &t)
	case Pairs:
		pairs(r, &t)
	default:
		return Task{}, fmt.Errorf("unknown task family %q: use %s", family, strings.Join(Families, ", "))
	}
	return t, nil
}

func familyNumber(f string) int { return slices.Index(Families, f) + 1 }

var (
	adjectives = []string{"wandering", "silent", "amber", "crooked", "gentle", "hollow", "bright", "frozen", "restless", "velvet", "rusty", "hidden", "lucky", "narrow", "quiet", "scarlet"}
	animals    = []string{"otter", "heron", "badger", "falcon", "lynx", "walrus", "gecko", "marten", "ibis", "tapir", "wombat", "osprey", "newt", "bison", "civet", "magpie"}
	fillerSubj = []string{"The old harbour", "A careful reader", "Every winter", "The village council", "Every traveller", "The river", "A quiet afternoon", "The library", "Our neighbour", "The early train"}
	fillerVerb = []string{"remembers", "changes", "carries", "describes", "ignores", "welcomes", "repeats", "follows", "outlasts", "reshapes"}
	fillerObj  = []string{"the smell of rain", "a long list of small debts", "the patience of good craftsmen", "stories nobody wrote down", "the sound of distant bells", "the habits of the season", "a map with missing roads", "letters that arrived too late", "the price of bread", "the names of forgotten ships"}
	fillerTail = []string{"as it always has", "without much fuss", "in ways that are easy to miss", "more than anyone admits", "whenever the wind turns", "long after the guests have gone", "with surprising care", "before anyone notices"}
)

// filler is one sentence of haystack prose.
func filler(r *rand.Rand) string {
	return fmt.Sprintf("%s %s %s %s. ", fillerSubj[r.IntN(len(fillerSubj))], fillerVerb[r.IntN(len(fillerVerb))],
		fillerObj[r.IntN(len(fillerObj))], fillerTail[r.IntN(len(fillerTail))])
}

// sniah hides one needle at a uniformly random depth of size characters
// of filler.
func sniah(r *rand.Rand, t *Task) {
	key := adjectives[r.IntN(len(adjectives))] + "-" + animals[r.IntN(len(animals))]
	value := fmt.Sprint(1_000_000 + r.IntN(9_000_000))
	needle := fmt.Sprintf("One of the special magic numbers for %s is: %s. ", key, value)
	at := r.IntN(t.Size - len(needle))
	var b strings.Builder
	b.Grow(t.Size + 200)
	placed := false
	for b.Len() < t.Size-len(needle) || !placed {
		if !placed && b.Len() >= at {
			b.WriteString(needle)
			placed = true
			continue
		}
		b.WriteString(filler(r))
	}
	t.Context = b.String()
	t.Kind, t.Answer = KindExact, value
	t.Question = fmt.Sprintf("Some special magic numbers are hidden in the context. What is the special magic number for %s mentioned in the context? Answer with the number only.", key)
}

// Labels are the coarse labels of OOLONG's trec_coarse split.
var Labels = []string{"abbreviation", "entity", "description and abstract concept", "human being", "location", "numeric value"}

// questionTemplates hold, per label, questions whose answer has that
// label; the blanks are filled from fillers.
var questionTemplates = map[string][]string{
	"abbreviation":                     {"What does %s stand for?", "What is the full form of the abbreviation %s?", "What does the acronym %s mean?"},
	"entity":                           {"What kind of %s is best for a cold climate?", "Which breed of %s was the first to be domesticated?", "What breed of %s has the longest coat?"},
	"description and abstract concept": {"Why does %s happen?", "How does %s work?", "What is the definition of %s?"},
	"human being":                      {"Who invented %s?", "Who was the first person to study %s?", "Which famous author wrote about %s?"},
	"location":                         {"Where is %s located?", "In which country can you find %s?", "Which city is closest to %s?"},
	"numeric value":                    {"How many %s are there in the world?", "When was %s first recorded?", "How far can %s travel in a day?"},
}

var blanks = map[string][]string{
	"abbreviation":                     {"NASA", "UNESCO", "HTML", "RADAR", "SCUBA", "LASER", "NATO", "OPEC"},
	"entity":                           {"dog", "horse", "cat", "sheep", "goat", "rabbit", "parrot", "camel"},
	"description and abstract concept": {"inflation", "photosynthesis", "a rainbow", "jet lag", "democracy", "erosion", "a solar eclipse", "nostalgia"},
	"human being":                      {"the telescope", "the printing press", "volcanoes", "the bicycle", "penicillin", "the steam engine", "glaciers", "the piano"},
	"location":                         {"the tallest waterfall", "the oldest university", "the Great Barrier Reef", "Mount Kilimanjaro", "the Dead Sea", "the largest desert", "the Leaning Tower of Pisa", "Lake Titicaca"},
	"numeric value":                    {"the blue whale", "a migrating swallow", "the comet Halley", "a desert camel", "the monarch butterfly", "an Arctic tern", "the first marathon", "a carrier pigeon"},
}

var months = []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// record is one line of an OOLONG-style context.
type record struct {
	user  int
	label string
}

func instance(r *rand.Rand, label string) string {
	ts := questionTemplates[label]
	bs := blanks[label]
	return fmt.Sprintf(ts[r.IntN(len(ts))], bs[r.IntN(len(bs))])
}

func line(r *rand.Rand, rec record) string {
	return fmt.Sprintf("Date: %s %02d, %d || User: %d || Instance: %s\n", months[r.IntN(12)], 1+r.IntN(28), 2020+r.IntN(5), rec.user, instance(r, rec.label))
}

// linesPrompt introduces an OOLONG-style context in a question.
const linesPrompt = "The context has one data point per line: a date, a user ID and an instance (a question). Each instance can be classified into exactly one of these labels: " +
	"'abbreviation', 'entity', 'description and abstract concept', 'human being', 'location', 'numeric value'. The labels are not given; decide each instance's label from its text. "

// oolong writes size characters of labelled lines and asks an
// aggregation question about them.
func oolong(r *rand.Rand, t *Task) {
	weights := make([]int, len(Labels))
	for i := range weights {
		weights[i] = 1 + r.IntN(6)
	}
	users := make([]int, 8+r.IntN(24))
	for i := range users {
		users[i] = 10000 + r.IntN(90000)
	}
	var b strings.Builder
	count := map[string]int{}
	for b.Len() < t.Size-200 {
		l := Labels[pick(r, weights)]
		b.WriteString(line(r, record{user: users[r.IntN(len(users))], label: l}))
		count[l]++
	}
	// One most common label, so that question has one answer.
	top := slices.MaxFunc(Labels, func(a, c string) int { return count[a] - count[c] })
	for _, l := range Labels {
		if l != top && count[l] == count[top] {
			b.WriteString(line(r, record{user: users[0], label: top}))
			count[top]++
			break
		}
	}
	t.Context = b.String()
	switch r.IntN(3) {
	case 0:
		l := Labels[r.IntN(len(Labels))]
		t.Kind, t.Answer = KindNumeric, fmt.Sprint(count[l])
		t.Question = linesPrompt + fmt.Sprintf("How many data points should be classified as label '%s'? Answer with the number only.", l)
	case 1:
		t.Kind, t.Answer = KindExact, top
		t.Question = linesPrompt + "Which label is the most common? Answer with the label only."
	default:
		i := r.IntN(len(Labels))
		j := (i + 1 + r.IntN(len(Labels)-1)) % len(Labels)
		a, c := Labels[i], Labels[j]
		rel := "same frequency as"
		switch {
		case count[a] > count[c]:
			rel = "more common than"
		case count[a] < count[c]:
			rel = "less common than"
		}
		t.Kind, t.Answer = KindExact, rel
		t.Question = linesPrompt + fmt.Sprintf("Is label '%s' more common, less common, or the same frequency as label '%s'? Answer with exactly one of: more common than, less common than, same frequency as.", a, c)
	}
}

// pairs writes size characters of lines in which two rare labels belong
// to a few planted users only, and asks for the pairs of users the
// condition holds for.
func pairs(r *rand.Rand, t *Task) {
	perm := r.Perm(len(Labels))
	a, c := Labels[perm[0]], Labels[perm[1]]
	common := []int{perm[2], perm[3], perm[4], perm[5]}
	users := map[int]bool{}
	newUser := func() int {
		for {
			u := 10000 + r.IntN(90000)
			if !users[u] {
				users[u] = true
				return u
			}
		}
	}
	var withA, withC, others []int
	for range 3 + r.IntN(5) {
		withA = append(withA, newUser())
	}
	both := r.IntN(2) == 0 // ask about A and C rather than A alone
	if both {
		for range 3 + r.IntN(5) {
			withC = append(withC, newUser())
		}
	}
	for range 20 + r.IntN(20) {
		others = append(others, newUser())
	}
	// The planted lines go at random places among the others.
	var planted []record
	for _, u := range withA {
		for range 1 + r.IntN(2) {
			planted = append(planted, record{u, a})
		}
	}
	for _, u := range withC {
		for range 1 + r.IntN(2) {
			planted = append(planted, record{u, c})
		}
	}
	all := append(slices.Clone(withA), withC...)
	all = append(all, others...)
	var b strings.Builder
	n := 0
	for b.Len() < t.Size-200 || n < len(planted) {
		if n < len(planted) && r.IntN(max(1, (t.Size-b.Len())/(100*(len(planted)-n)+1))) == 0 {
			b.WriteString(line(r, planted[n]))
			n++
			continue
		}
		b.WriteString(line(r, record{all[r.IntN(len(all))], Labels[common[r.IntN(len(common))]]}))
	}
	t.Context = b.String()
	var ps []string
	if both {
		for _, u := range withA {
			for _, v := range withC {
				ps = append(ps, pairText(u, v))
			}
		}
		t.Question = linesPrompt + fmt.Sprintf("List every pair of user IDs where one user has at least one instance with label '%s' and the other user has at least one instance with label '%s'. Give one pair per line as (smaller ID, larger ID), nothing else.", a, c)
	} else {
		for i, u := range withA {
			for _, v := range withA[i+1:] {
				ps = append(ps, pairText(u, v))
			}
		}
		t.Question = linesPrompt + fmt.Sprintf("List every pair of user IDs where both users have at least one instance with label '%s'. Give one pair per line as (smaller ID, larger ID), nothing else.", a)
	}
	slices.Sort(ps)
	t.Kind, t.Answer = KindPairs, strings.Join(ps, "\n")
}

func pairText(u, v int) string {
	return fmt.Sprintf("%d,%d", min(u, v), max(u, v))
}

// pick draws an index with the given weights.
func pick(r *rand.Rand, w []int) int {
	total := 0
	for _, x := range w {
		total += x
	}
	n := r.IntN(total)
	for i, x := range w {
		if n < x {
			return i
		}
		n -= x
	}
	return len(w) - 1
}
