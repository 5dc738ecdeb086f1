// Package gen writes the inputs of rlm's examples deterministically, so
// that megabytes of text need not be committed: the same seed gives the
// same bytes on every machine and Go version (math/rand/v2's PCG is a
// specified algorithm).
package gen

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Needle is the fact hidden in the haystack, and NeedleAnswer what a
// correct run answers.
const (
	Needle       = "Note for the night shift: the access code for the east vault is 7319-KESTREL, changed on Monday."
	NeedleAnswer = "7319-KESTREL"
)

var (
	subjects = []string{"The committee", "A courier", "The night porter", "Our supplier", "The auditor", "A technician", "The harbour master", "The archivist", "The new intern", "The regional office"}
	verbs    = []string{"reviewed", "misplaced", "delivered", "questioned", "repaired", "catalogued", "postponed", "approved", "photographed", "rejected"}
	objects  = []string{"the quarterly figures", "a crate of lemons", "the boiler schedule", "the visitor log", "three folding chairs", "the insurance forms", "a broken lantern", "the parking permits", "the tide tables", "an unsigned memo"}
	places   = []string{"in the north wing", "near the loading dock", "before lunch", "after the storm", "on the second floor", "at the old pier", "during the inspection", "behind the library", "by the west gate", "without telling anyone"}
)

// WriteHaystack writes about size bytes of filler log lines with the needle
// hidden once, about 61 % of the way in.
func WriteHaystack(w io.Writer, size int) error {
	bw := bufio.NewWriter(w)
	r := rand.New(rand.NewPCG(2024, 6))
	written, placed := 0, false
	for n := 1; written < size; n++ {
		line := fmt.Sprintf("[entry %06d] %s %s %s %s.\n", n,
			subjects[r.IntN(len(subjects))], verbs[r.IntN(len(verbs))], objects[r.IntN(len(objects))], places[r.IntN(len(places))])
		if !placed && written >= size*61/100 {
			line = fmt.Sprintf("[entry %06d] %s\n", n, Needle)
			placed = true
		}
		k, err := bw.WriteString(line)
		if err != nil {
			return err
		}
		written += k
	}
	return bw.Flush()
}

// Labels of the aggregation example's items.
var Labels = []string{"bug", "feature", "question", "docs", "security"}

// WriteItems writes n issue-tracker lines "#ID | label: L | title", labels
// drawn with uneven weights.
func WriteItems(w io.Writer, n int) error {
	bw := bufio.NewWriter(w)
	r := rand.New(rand.NewPCG(7, 42))
	weights := []int{40, 25, 20, 10, 5}
	titles := []string{"crash on start", "add dark mode", "how to configure proxy", "typo in README", "token leaks in logs", "slow search", "export to CSV", "install fails on ARM", "clarify licence", "XSS in comments"}
	for i := 1; i <= n; i++ {
		k := r.IntN(100)
		li := 0
		for acc := weights[0]; k >= acc; acc += weights[li] {
			li++
		}
		if _, err := fmt.Fprintf(bw, "#%05d | label: %s | %s\n", i, Labels[li], titles[r.IntN(len(titles))]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Sizes of the generated inputs.
const (
	HaystackBytes = 3 << 20
	ItemCount     = 2000
)

// Main is the rlm-gen-examples command: it writes the examples' inputs
// into DIR (default "examples"): DIR/needle/haystack.txt and
// DIR/aggregate/items.txt, or single files with -needle / -items.
func Main() {
	needle := flag.String("needle", "", "write only the needle haystack, to this file")
	items := flag.String("items", "", "write only the aggregation items, to this file")
	flag.Parse()
	if *needle == "" && *items == "" {
		dir := "examples"
		if flag.NArg() > 0 {
			dir = flag.Arg(0)
		}
		*needle = filepath.Join(dir, "needle", "haystack.txt")
		*items = filepath.Join(dir, "aggregate", "items.txt")
	}
	if err := write(*needle, func(w io.Writer) error { return WriteHaystack(w, HaystackBytes) }); err != nil {
		fmt.Fprintln(os.Stderr, "rlm-gen-examples:", err)
		os.Exit(1)
	}
	if err := write(*items, func(w io.Writer) error { return WriteItems(w, ItemCount) }); err != nil {
		fmt.Fprintln(os.Stderr, "rlm-gen-examples:", err)
		os.Exit(1)
	}
}

func write(path string, gen func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := gen(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
