package testscripts

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rlmkit/rlm/core/traceview/browsertest"
)

// browse [-search TEXT] [-screenshot NAME] [-expand] PAGE.html opens PAGE
// in headless Chromium as a user would (from disk) and prints, on stdout,
// the page's outline (browsertest.Outline: task, answer, notice, one line
// per tree node with its parent), then with -search the hits of typing
// TEXT into the search box and what pressing Enter revealed. -expand
// clicks "expand all" first. -screenshot writes a PNG of the page to NAME
// in $WORK (and to docs/NAME in the repository when RLM_UPDATE_DOCS is
// set: make docs-screenshot). It fails when the page requests anything
// but itself: the viewer must load nothing from the network.
func cmdBrowse(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("usage: browse [-search TEXT] [-screenshot NAME] [-expand] PAGE.html")
	}
	fs := flag.NewFlagSet("browse", flag.ContinueOnError)
	search := fs.String("search", "", "")
	shot := fs.String("screenshot", "", "")
	expand := fs.Bool("expand", false, "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		ts.Fatalf("usage: browse [-search TEXT] [-screenshot NAME] [-expand] PAGE.html")
	}
	path, err := browsertest.Find()
	if err != nil {
		ts.Fatalf("%v (guard the script with [!browser] skip)", err)
	}
	dir, err := os.MkdirTemp(ts.Getenv("WORK"), "chromium-")
	ts.Check(err)
	b, err := browsertest.Start(path, dir)
	ts.Check(err)
	defer b.Close()
	p, err := b.Open(ts.MkAbs(fs.Arg(0)))
	ts.Check(err)
	defer p.Close()

	var out strings.Builder
	if *expand {
		ts.Check(p.ExpandAll())
	}
	o, err := p.Outline()
	ts.Check(err)
	out.WriteString(o)
	if *search != "" {
		s, err := p.Search(*search)
		ts.Check(err)
		out.WriteString(s)
		if !strings.HasPrefix(s, "no match") {
			r, err := p.Reveal()
			ts.Check(err)
			out.WriteString(r)
		}
	}
	if *shot != "" {
		name := ts.MkAbs(*shot)
		ts.Check(p.Screenshot(name))
		if os.Getenv("RLM_UPDATE_DOCS") != "" {
			if src := ts.Getenv("RLM_SRC"); src != "" {
				data, err := os.ReadFile(name)
				ts.Check(err)
				ts.Check(os.WriteFile(filepath.Join(src, "docs", filepath.Base(*shot)), data, 0o644))
			}
		}
	}
	if f := p.Foreign(); len(f) > 0 {
		ts.Fatalf("the page made network requests: %s", strings.Join(f, ", "))
	}
	out.WriteString("requests: only the page itself\n")
	_, err = ts.Stdout().Write([]byte(out.String()))
	ts.Check(err)
}

// condBrowser is the [browser] condition: chromium is installed. With
// RLM_REQUIRE_BROWSER set (CI) a missing browser is an error, so that a
// script guarded by [!browser] skip fails instead of skipping.
func condBrowser() (bool, error) {
	if _, err := browsertest.Find(); err != nil {
		if browsertest.Required() {
			return false, fmt.Errorf("RLM_REQUIRE_BROWSER is set but %v", err)
		}
		return false, nil
	}
	return true, nil
}
