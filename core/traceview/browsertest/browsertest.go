// Package browsertest drives a real headless Chromium through chromedp
// for the trace viewer's tests: pages are opened from disk as a user
// would, and every network request they make is recorded so that a test
// can prove a page loads nothing.
//
// # Notes
//
// The browser is Debian's chromium (.ci/setup installs it); $RLM_CHROMIUM
// names another. Tests skip when none is found unless RLM_REQUIRE_BROWSER
// is set, as CI sets it, so that a missing browser fails there instead of
// passing silently. Chromium runs as root on CI machines, which it only
// does without its own sandbox (--no-sandbox); the pages are the test's
// own files.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Timeout bounds one page's load and every wait on it. It is generous:
// tests run on shared, loaded machines, and it only limits a hang.
const Timeout = 3 * time.Minute

// Required says whether a missing browser is a failure (RLM_REQUIRE_BROWSER).
func Required() bool { return os.Getenv("RLM_REQUIRE_BROWSER") != "" }

// Find returns the browser's path: $RLM_CHROMIUM, or chromium (or
// chromium-browser, google-chrome) on PATH.
func Find() (string, error) {
	if p := os.Getenv("RLM_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium found on PATH: install it (apt-get install chromium, as .ci/setup does) or set RLM_CHROMIUM")
}

// TB is the part of testing.TB (and of a testscript) the helpers need.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Require returns the browser's path, or skips t (fails it when
// RLM_REQUIRE_BROWSER is set).
func Require(t TB) string {
	t.Helper()
	p, err := Find()
	if err != nil {
		if Required() {
			t.Fatalf("RLM_REQUIRE_BROWSER is set but %v", err)
		}
		t.Skipf("%v (set RLM_REQUIRE_BROWSER=1 to make this a failure)", err)
	}
	return p
}

// Browser is one headless Chromium process.
type Browser struct {
	ctx    context.Context
	cancel func()
}

// Start starts the browser at path with a fresh profile in dataDir (which
// the caller removes). The browser's TMPDIR is dataDir too: chromium makes
// its singleton-socket directory (org.chromium.Chromium.*) there, and a
// browser that is killed, as chromedp ends it, never removes it, so in
// the host's /tmp every test left one behind.
func Start(path, dataDir string) (*Browser, error) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Env("TMPDIR=" + dataDir),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(dataDir),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	if err := first(bctx, bcancel); err != nil {
		acancel()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	return &Browser{ctx: bctx, cancel: func() { bcancel(); acancel() }}, nil
}

// first makes the first Run on a chromedp context, which starts the
// browser or opens the tab. That Run binds the browser (tab) to the
// context it is given, so it must get ctx itself, not a context with a
// timeout (whose end would close it): a watchdog cancels ctx instead if
// the start hangs.
func first(ctx context.Context, cancel func()) error {
	t := time.AfterFunc(Timeout, cancel)
	defer t.Stop()
	if err := chromedp.Run(ctx); err != nil {
		cancel()
		return err
	}
	return nil
}

// Close stops the browser and waits for it to exit.
func (b *Browser) Close() { b.cancel() }

// Page is one tab showing one file.
type Page struct {
	ctx    context.Context
	cancel func()
	URL    string

	mu   sync.Mutex
	reqs []string
}

// Open opens file in a new tab and waits until the viewer has rendered
// (body[data-ready]).
func (b *Browser) Open(file string) (*Page, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	u := (&url.URL{Scheme: "file", Path: abs}).String()
	tctx, tcancel := chromedp.NewContext(b.ctx)
	if err := first(tctx, tcancel); err != nil {
		return nil, fmt.Errorf("opening a tab: %w", err)
	}
	p := &Page{ctx: tctx, cancel: tcancel, URL: u}
	chromedp.ListenTarget(tctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			p.mu.Lock()
			p.reqs = append(p.reqs, e.Request.URL)
			p.mu.Unlock()
		}
	})
	if err := p.Run(network.Enable(), chromedp.Navigate(u), chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery)); err != nil {
		tcancel()
		return nil, fmt.Errorf("opening %s: %w", file, err)
	}
	return p, nil
}

// Run runs actions on the page, bounded by [Timeout].
func (p *Page) Run(actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(p.ctx, Timeout)
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// Eval evaluates a JavaScript expression into out.
func (p *Page) Eval(expr string, out any) error {
	return p.Run(chromedp.Evaluate(expr, out))
}

// Requests are the URLs the page asked for, its own included.
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.reqs...)
}

// Foreign are the requests for anything but the page itself.
func (p *Page) Foreign() []string {
	var out []string
	for _, r := range p.Requests() {
		if r != p.URL {
			out = append(out, r)
		}
	}
	return out
}

// Screenshot writes a PNG of the whole page.
func (p *Page) Screenshot(path string) error {
	var buf []byte
	if err := p.Run(chromedp.FullScreenshot(&buf, 100)); err != nil {
		return err
	}
	return os.WriteFile(path, buf, 0o644)
}

// Close closes the tab.
func (p *Page) Close() { p.cancel() }

// outlineJS describes a rendered page as lines of text: its title, task,
// answer and notice, then one line per tree node in document order, as
// "KIND KEY NAME < PARENT-KEY" (the nearest enclosing node), with
// "(hidden)" when the node is inside a closed one.
const outlineJS = `(() => {
  const out = [], txt = s => s.replace(/\s*\n\s*/g, ' | ').trim();
  out.push('title: ' + document.title);
  const q = s => document.querySelector(s);
  out.push('task: ' + (q('#task .text') ? txt(q('#task .text').innerText) : ''));
  out.push('answer: ' + (q('#answer') ? txt(q('#answer').innerText) : ''));
  if (q('#notice')) out.push('notice: ' + txt(q('#notice').innerText));
  document.querySelectorAll('#tree .node').forEach(e => {
    const up = e.parentElement.closest('.node');
    out.push(e.dataset.kind + ' ' + e.dataset.key + ' ' + e.querySelector(':scope > .head .name').textContent +
      (up ? ' < ' + up.dataset.key : '') + (e.offsetParent === null ? ' (hidden)' : ''));
  });
  return out.join('\n') + '\n';
})()`

// Outline returns the page's outline (see outlineJS).
func (p *Page) Outline() (string, error) {
	var s string
	err := p.Eval(outlineJS, &s)
	return s, err
}

// Search types text into the page's search box as a user would, waits
// for the result count, and returns the hits as lines "KEY FIELD" and the
// count line.
func (p *Page) Search(text string) (string, error) {
	var s string
	err := p.Run(
		chromedp.Evaluate(`document.getElementById('search').value = ''`, nil),
		chromedp.SendKeys(`#search`, text, chromedp.ByID),
		// The search runs shortly after the last key: wait for the
		// results of the whole text, not of a prefix.
		chromedp.Poll(`document.getElementById('results').dataset.query === `+strconv.Quote(text), nil, chromedp.WithPollingTimeout(Timeout)),
		chromedp.Evaluate(`(() => {
  const out = [document.getElementById('hit-count').textContent];
  document.querySelectorAll('#results .hit').forEach(h => out.push('hit ' + h.dataset.key + ' ' + h.dataset.field));
  return out.join('\n') + '\n';
})()`, &s),
	)
	return s, err
}

// Reveal presses Enter in the search box (go to the first match) and
// returns the revealed node's key and the visible marked text in it.
func (p *Page) Reveal() (string, error) {
	var s string
	err := p.Run(
		chromedp.SendKeys(`#search`, "\r", chromedp.ByID),
		chromedp.WaitVisible(`.node.target mark`, chromedp.ByQuery),
		chromedp.Evaluate(`(() => {
  const t = document.querySelector('.node.target');
  const out = ['revealed ' + t.dataset.key + (t.offsetParent === null ? ' (hidden)' : '')];
  t.querySelectorAll(':scope > .body > .block mark').forEach(m => {
    if (m.offsetParent !== null) out.push('mark ' + m.closest('.block').dataset.field + ': ' + m.textContent);
  });
  out.push('focused ' + (document.activeElement.closest('.node') || {dataset: {}}).dataset.key);
  return out.join('\n') + '\n';
})()`, &s),
	)
	return s, err
}

// ExpandAll clicks the page's "expand all" button.
func (p *Page) ExpandAll() error {
	return p.Run(chromedp.Click(`#expand-all`, chromedp.ByID))
}
