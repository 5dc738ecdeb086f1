package traceview

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rlmkit/rlm/core/traceview/browsertest"
)

func openSynth(t testing.TB, n int) (*browsertest.Page, func()) {
	t.Helper()
	chrome := browsertest.Require(t)
	dir := t.TempDir()
	evs := synth(n)
	page := filepath.Join(dir, "big.html")
	if err := WriteFile(page, Build(evs, Report{Events: len(evs), Ended: true})); err != nil {
		t.Fatal(err)
	}
	// The profile is not under t.TempDir: chromium's helper processes may
	// still write into it for a moment after the browser is closed, which
	// would fail TempDir's cleanup. It is removed with retries instead.
	profile, err := os.MkdirTemp("", "traceview-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	removeProfile := func() {
		for end := time.Now().Add(10 * time.Second); os.RemoveAll(profile) != nil && time.Now().Before(end); {
			time.Sleep(100 * time.Millisecond)
		}
	}
	b, err := browsertest.Start(chrome, profile)
	if err != nil {
		removeProfile()
		t.Fatal(err)
	}
	p, err := b.Open(page)
	if err != nil {
		b.Close()
		removeProfile()
		t.Fatal(err)
	}
	return p, func() { p.Close(); b.Close(); removeProfile() }
}

// A 5,000-event trace opens collapsed, renders a bounded number of nodes,
// and search still reaches a cell far past what was rendered. (How fast
// is BenchmarkBrowserRender5000's business, not a test's.)
func TestBrowserLargeTrace(t *testing.T) {
	p, done := openSynth(t, 5000)
	defer done()
	out, err := p.Outline()
	if err != nil {
		t.Fatal(err)
	}
	iters := regexp.MustCompile(`(?m)^iter L0\.i\d+ iteration \d+ < L0$`).FindAllString(out, -1)
	if len(iters) != 200 {
		t.Errorf("%d iterations rendered, want the first 200", len(iters))
	}
	if strings.Contains(out, "\ncell ") {
		t.Error("cells rendered before their iteration was opened")
	}
	if !strings.Contains(out, "answer: answer · final · FINAL(…) in iteration") {
		t.Errorf("no answer in:\n%.2000s", out)
	}
	hits, err := p.Search("entry 001234 ")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hits, "1 match\nhit L0.i1233.c0 output\n") {
		t.Fatalf("search: %s", hits)
	}
	rev, err := p.Reveal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rev, "revealed L0.i1233.c0\nmark output: entry 001234 \n") {
		t.Fatalf("reveal: %s", rev)
	}
	if f := p.Foreign(); len(f) > 0 {
		t.Errorf("network requests: %v", f)
	}
}

// BenchmarkBrowserRender5000 is the time from navigation to a rendered
// page (body[data-ready]) for a 5,000-event trace in headless Chromium.
func BenchmarkBrowserRender5000(b *testing.B) {
	p, done := openSynth(b, 5000)
	defer done()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Run(chromedp.Navigate(p.URL), chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery)); err != nil {
			b.Fatal(err)
		}
	}
}
