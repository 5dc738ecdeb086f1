// Package toolpath finds a runtime's executable and its version once, and
// remembers the answer on disk.
//
// Asking a tool for its version costs a process start (node: ~40 ms, a
// pyenv shim: ~170 ms), and every rlm command would pay it again. The cache
// is keyed by the executable's path, size and modification time plus the
// environment variables that steer version managers, so upgrading the tool
// or switching pyenv versions invalidates it, and by the running plugin
// binary itself: the probe is code in that binary, so a plugin rebuilt
// with another probe probes again instead of reading its old answer.
package toolpath

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Tool is a resolved runtime executable.
type Tool struct {
	// Exe is the executable to run: a version manager's shim resolved to
	// the real interpreter when Probe reports one.
	Exe string `json:"exe"`
	// Version is as the tool prints it, e.g. "Python 3.11.7".
	Version string `json:"version"`
	// Extra holds probe-specific facts (a Python prefix, GOROOT).
	Extra map[string]string `json:"extra,omitempty"`
}

// Probe inspects the executable at path and reports the real executable
// and version. It runs only on a cache miss.
type Probe func(path string) (Tool, error)

// NotFoundError is returned when the tool is not on PATH.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("'%s' not found in PATH", e.Name) }

var (
	mu  sync.Mutex
	mem = map[string]Tool{}
	// recent holds Resolve's answers for a moment: looking a tool up
	// again (PATH's directories, a stat, the key's hash, the working
	// directory for a shim) is ~30 system calls, a tenth of what a warm
	// run's plugin does in all.
	recent Memo[Tool]
)

// recheckAfter bounds how long a tool installed, upgraded or switched
// (pyenv) while a plugin serves goes unseen. A variable for tests.
var recheckAfter = time.Second

// Memo remembers answers derived from a tool and the file system for a
// moment (a second): what a warm run would otherwise look up again on
// every run, at the price of seeing a change a second late at most.
// The zero Memo is ready to use.
type Memo[T any] struct {
	mu sync.Mutex
	m  map[string]memoEntry[T]
}

type memoEntry[T any] struct {
	v  T
	at time.Time
}

// Get returns key's answer from the last moment, or computes it. An
// error is never remembered.
func (m *Memo[T]) Get(key string, compute func() (T, error)) (T, error) {
	m.mu.Lock()
	e, ok := m.m[key]
	m.mu.Unlock()
	if ok && time.Since(e.at) < recheckAfter {
		return e.v, nil
	}
	v, err := compute()
	if err != nil {
		return v, err
	}
	m.mu.Lock()
	if m.m == nil {
		m.m = map[string]memoEntry[T]{}
	}
	m.m[key] = memoEntry[T]{v, time.Now()}
	m.mu.Unlock()
	return v, nil
}

// versionManagerEnv changes which interpreter a shim runs.
var versionManagerEnv = []string{"PYENV_VERSION", "PYENV_ROOT", "NODENV_VERSION", "NVM_BIN", "GOTOOLCHAIN", "GOROOT"}

// Resolve finds name on PATH and returns its probed facts, from the cache
// when the executable has not changed. An answer is reused without
// looking again for recheckAfter (a second), as long as PATH and the
// version managers' variables are the same.
func Resolve(name string, probe Probe) (Tool, error) {
	rkey := name + "\x00" + os.Getenv("PATH")
	for _, k := range versionManagerEnv {
		rkey += "\x00" + os.Getenv(k)
	}
	return recent.Get(rkey, func() (Tool, error) { return resolve(name, probe) })
}

func resolve(name string, probe Probe) (Tool, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return Tool{}, &NotFoundError{Name: name}
	}
	st, err := os.Stat(path)
	if err != nil {
		return Tool{}, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00", path, st.Size(), st.ModTime().UnixNano())
	for _, k := range versionManagerEnv {
		fmt.Fprintf(h, "%s=%s\x00", k, os.Getenv(k))
	}
	fmt.Fprintf(h, "probe=%s\x00", selfStamp())
	if strings.Contains(path, "shims") {
		// pyenv also reads .python-version files up from the cwd.
		wd, _ := os.Getwd()
		fmt.Fprintf(h, "cwd=%s\x00", wd)
	}
	key := name + "-" + hex.EncodeToString(h.Sum(nil))[:24]

	mu.Lock()
	defer mu.Unlock()
	if t, ok := mem[key]; ok {
		return t, nil
	}
	file := cacheFile(key)
	if b, err := os.ReadFile(file); err == nil {
		var t Tool
		if json.Unmarshal(b, &t) == nil && t.Exe != "" {
			if _, err := os.Stat(t.Exe); err == nil {
				mem[key] = t
				return t, nil
			}
		}
	}
	t, err := probe(path)
	if err != nil {
		return Tool{}, err
	}
	if t.Exe == "" {
		t.Exe = path
	}
	mem[key] = t
	if file != "" {
		if b, err := json.Marshal(t); err == nil {
			_ = os.MkdirAll(filepath.Dir(file), 0o755)
			tmp := file + ".tmp" + fmt.Sprint(os.Getpid())
			if os.WriteFile(tmp, b, 0o644) == nil {
				_ = os.Rename(tmp, file)
			}
		}
	}
	return t, nil
}

func cacheFile(key string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "rlm", "tools", key+".json")
}

// VersionLine is the Probe of a tool that states its version as the first
// line of `TOOL args` (bash --version, node --version).
//
// A tool that exists but does not answer (no such option, an error, no
// output) is still usable: its version is "unknown (why)", never an empty
// string that reads as if nothing had been asked.
func VersionLine(args ...string) Probe {
	return func(path string) (Tool, error) {
		v, err := FirstLine(path, args...)
		switch {
		case err != nil:
			v = "unknown (" + err.Error() + ")"
		case v == "":
			v = fmt.Sprintf("unknown (%s %s printed nothing)", filepath.Base(path), strings.Join(args, " "))
		}
		return Tool{Exe: path, Version: v}, nil
	}
}

// selfStamp identifies the running binary (path, size, modification
// time), computed once.
var selfStamp = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	st, err := os.Stat(exe)
	if err != nil {
		return exe
	}
	return fmt.Sprintf("%s\x00%d\x00%d", exe, st.Size(), st.ModTime().UnixNano())
})

// FirstLine runs path with args and returns the first line it prints, a
// common way tools state their version.
func FirstLine(path string, args ...string) (string, error) {
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("%s %s: %v", filepath.Base(path), strings.Join(args, " "), err)
		if o, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n"); o != "" {
			msg += ": " + o
		}
		return "", errors.New(msg)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line), nil
}
