package compiled

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/rlmkit/rlm/core"
)

// Cache holds compiled programs by a key of everything that decides the
// output (see Key): one directory per key under Dir, filled atomically
// (built elsewhere, then renamed into place), so a reader never sees half
// an artifact and two processes compiling the same source both end with
// one complete directory. Within a process, identical concurrent requests
// share one compilation (Do).
type Cache struct {
	Dir string

	mu     sync.Mutex
	flight map[string]*call
}

type call struct {
	done     chan struct{}
	res      *core.CompileResult
	artifact string
	err      error
}

// Key hashes what decides a build's output: the language, the compiler
// and its version, the flags, the source and the request's other files
// (headers a C program includes), and the compile limits, which decide
// whether a build fails.
func Key(lang, exe, version string, flags []string, p core.Program, timeout int64, memory int64) string {
	h := sha256.New()
	fmt.Fprintf(h, "rlm-compiled-v1\x00%s\x00%s\x00%s\x00", lang, exe, version)
	for _, f := range flags {
		fmt.Fprintf(h, "%s\x00", f)
	}
	fmt.Fprintf(h, "%d\x00%d\x00%d\x00", timeout, memory, len(p.Code))
	h.Write([]byte(p.Code))
	files := append([]core.File(nil), p.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		fmt.Fprintf(h, "\x00%s\x00%d\x00", f.Path, len(f.Data))
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Path is the directory a key's artifact lives in once built.
func (c *Cache) Path(key string) string { return filepath.Join(c.Dir, key) }

// Lookup reports whether key is built.
func (c *Cache) Lookup(key string) (string, bool) {
	p := c.Path(key)
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return p, true
	}
	return p, false
}

// Do runs build for key unless another goroutine of this process already
// is, in which case it waits for that one and shares its outcome (a
// compile error included: the same source fails the same way). build
// returns the directory it built in; on success Do moves it into the cache.
func (c *Cache) Do(key string, build func() (res *core.CompileResult, dir string, err error)) (*core.CompileResult, string, error) {
	c.mu.Lock()
	if c.flight == nil {
		c.flight = map[string]*call{}
	}
	if cl, ok := c.flight[key]; ok {
		c.mu.Unlock()
		<-cl.done
		return cl.res, cl.artifact, cl.err
	}
	cl := &call{done: make(chan struct{})}
	c.flight[key] = cl
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.flight, key)
		c.mu.Unlock()
		close(cl.done)
	}()
	res, dir, err := build()
	cl.res, cl.err = res, err
	if err == nil && dir != "" {
		cl.artifact, cl.err = c.store(key, dir)
	}
	return cl.res, cl.artifact, cl.err
}

// store copies the built directory into a temporary sibling of the final
// one and renames it into place. Another process that got there first
// wins; its directory has the same content.
func (c *Cache) store(key, built string) (string, error) {
	final := c.Path(key)
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the compile cache %s: %w", c.Dir, err)
	}
	tmp, err := os.MkdirTemp(c.Dir, ".tmp-"+key+"-")
	if err != nil {
		return "", fmt.Errorf("creating the compile cache entry: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, os.DirFS(built)); err != nil {
		return "", fmt.Errorf("copying the compiled program into the cache: %w", err)
	}
	// CopyFS makes directories 0777 &^ umask but files keep only the
	// permission bits; the sandboxed program runs as another user.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, ok := c.Lookup(key); ok {
			return final, nil
		}
		return "", fmt.Errorf("caching the compiled program: %w", err)
	}
	return final, nil
}
