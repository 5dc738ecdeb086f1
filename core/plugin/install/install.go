// Package install installs a program's requirements once per distinct set
// and keeps them in a cache that every later run of the same set reuses.
//
// A set is keyed by a hash of the runtime (its name and version as the tool
// prints it), the sorted requirements and the index settings, so "b,a" and
// "a,b" share one directory and a new interpreter gets a fresh one. Local
// paths among the requirements (a wheel or a tarball) add their size and
// modification time to the key, so rebuilding the file invalidates it, and
// a local find-links directory adds its own (adding a wheel changes it).
//
// # Notes
//
//   - The cache lives in $XDG_CACHE_HOME/rlm/requirements/RUNTIME/HASH (see
//     os.UserCacheDir). A directory there is complete by construction: the
//     installer writes into a temporary sibling which is renamed into place
//     only when it succeeded.
//   - Concurrent installs of one set, in one process or many, do not race:
//     the installer runs under an exclusive lock on HASH.lock; whoever waited
//     finds the directory made and uses it.
//   - Installation has its own time limit (Limits.install_timeout_ms, default
//     DefaultTimeout), separate from the program's wall limit.
//   - A failed install is not cached: the next run tries again.
package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/program"
)

// DefaultTimeout bounds an installation when the request sets no
// install_timeout_ms.
const DefaultTimeout = defaults.InstallTimeout

// Installer describes one package manager.
type Installer struct {
	// Runtime names the cache subdirectory ("python", "node").
	Runtime string
	// Version is the runtime's version string; part of the key.
	Version string
	// Command returns the command that installs reqs into dir (an empty
	// directory the installer may fill as it likes).
	Command func(dir string, reqs []string, opt core.InstallOptions) []string
	// Env is the installer's complete environment.
	Env []string
}

// Outcome is a set ready to use, or why it is not.
type Outcome struct {
	// Dir holds the installed set; empty when Failed is set.
	Dir    string
	Cached bool
	// Duration is the time spent, lock waits included.
	Duration time.Duration
	// Failed, when not nil, is the result to return instead of running the
	// program: ended_by INSTALL_FAILED with the installer's output.
	Failed *core.Result
}

// Root is the directory all requirement sets live under.
func Root() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for requirements (set XDG_CACHE_HOME or HOME): %w", err)
	}
	return filepath.Join(dir, "rlm", "requirements"), nil
}

// Normalize trims, drops empty entries, sorts and de-duplicates reqs.
func Normalize(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Validate refuses requirements an installer would read as options
// ("--target=/", "-r file") or that hold control characters: a requirement
// names a package, a version spec, a URL or a local file, nothing else.
func Validate(reqs []string) error {
	for _, r := range reqs {
		t := strings.TrimSpace(r)
		if strings.HasPrefix(t, "-") {
			return fmt.Errorf("requirement %q looks like an installer option; give package names (use the install options for index settings)", r)
		}
		if strings.ContainsFunc(t, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return fmt.Errorf("requirement %q contains a control character", r)
		}
	}
	return nil
}

// Key is the cache key of a set.
func (in *Installer) Key(reqs []string, opt core.InstallOptions) string {
	h := sha256.New()
	fmt.Fprintf(h, "rlm-requirements-v1\x00%s\x00%s\x00", in.Runtime, in.Version)
	for _, r := range Normalize(reqs) {
		fmt.Fprintf(h, "req=%s\x00", r)
		if filepath.IsAbs(r) {
			if st, err := os.Stat(r); err == nil {
				fmt.Fprintf(h, "local=%d/%d\x00", st.Size(), st.ModTime().UnixNano())
			}
		}
	}
	fmt.Fprintf(h, "index=%s\x00no_index=%t\x00npm=%s\x00", opt.IndexURL, opt.NoIndex, opt.NPMRegistry)
	for _, l := range opt.FindLinks {
		fmt.Fprintf(h, "find_links=%s\x00", l)
		if filepath.IsAbs(l) {
			// A wheel added to a local directory changes its mtime.
			if st, err := os.Stat(l); err == nil {
				fmt.Fprintf(h, "local=%d\x00", st.ModTime().UnixNano())
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Ensure returns the directory holding reqs installed, installing them
// first unless an earlier run did. limits supplies install_timeout_ms and
// the output cap for the installer's messages.
func (in *Installer) Ensure(ctx context.Context, reqs []string, opt core.InstallOptions, limits core.Limits) (*Outcome, error) {
	start := time.Now()
	if err := Validate(reqs); err != nil {
		return nil, err
	}
	reqs = Normalize(reqs)
	root, err := Root()
	if err != nil {
		return nil, err
	}
	base := filepath.Join(root, in.Runtime)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("creating the requirements cache: %w", err)
	}
	final := filepath.Join(base, in.Key(reqs, opt))
	if isDir(final) {
		return &Outcome{Dir: final, Cached: true, Duration: time.Since(start)}, nil
	}

	timeout := limits.InstallTimeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	unlock, err := lock(lctx, final+".lock")
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return &Outcome{Duration: time.Since(start), Failed: failure(nil,
				core.InstallTimedOut("installing requirements (waiting for another install of the same set)", timeout))}, nil
		}
		return nil, err
	}
	defer unlock()
	if isDir(final) { // another process installed it while we waited
		return &Outcome{Dir: final, Cached: true, Duration: time.Since(start)}, nil
	}

	tmp, err := os.MkdirTemp(base, ".tmp-")
	if err != nil {
		return nil, fmt.Errorf("creating the install directory: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after the rename; cleans up a failure
	remaining := timeout - time.Since(start)
	if remaining <= 0 {
		remaining = time.Millisecond
	}
	res, err := program.Exec(ctx, program.Command{
		Argv:   in.Command(tmp, reqs, opt),
		Dir:    tmp,
		Env:    in.Env,
		Limits: limits,
		Wall:   remaining,
	})
	if err != nil {
		return nil, fmt.Errorf("running the %s installer: %w", in.Runtime, err)
	}
	if res.EndedBy != ending.Exit || res.ExitCode != 0 {
		why := fmt.Sprintf("installing requirements (%s) failed", strings.Join(reqs, ", "))
		switch res.EndedBy {
		case ending.Timeout:
			why = core.InstallTimedOut(fmt.Sprintf("installing requirements (%s)", strings.Join(reqs, ", ")), timeout)
		case ending.Cancelled:
			why = "installing requirements was cancelled"
		}
		return &Outcome{Duration: time.Since(start), Failed: failure(res, why)}, nil
	}
	// MkdirTemp made it 0700; a namespace sandbox started by root reads it
	// as uid 65534 (the files inside are the installer's usual 0644/0755).
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("caching the installed requirements: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("caching the installed requirements: %w", err)
	}
	return &Outcome{Dir: final, Duration: time.Since(start)}, nil
}

// failure builds the result of a failed install: the installer's stdout and
// stderr both go to stderr, and the program does not run.
func failure(inst *core.Result, why string) *core.Result {
	r := &core.Result{
		EndedBy:  ending.InstallFailed,
		ExitCode: 1,
		Error:    why,
		Backend:  "native",
	}
	if inst != nil {
		r.Stderr = inst.Stdout + inst.Stderr
		r.StderrOmitted = inst.StdoutOmitted + inst.StderrOmitted
		if inst.ExitCode > 0 && inst.EndedBy == ending.Exit {
			r.ExitCode = inst.ExitCode
		}
	}
	return r
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// BaseEnv is the scrubbed environment installers start from: PATH, a UTF-8
// locale, and HOME pointing into rlm's cache (never the workspace, where
// an installer's own caches would come back as produced files).
func BaseEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	home := os.TempDir()
	if root, err := Root(); err == nil {
		home = filepath.Join(filepath.Dir(root), "installer-home")
		_ = os.MkdirAll(home, 0o755)
	}
	return []string{"PATH=" + path, "HOME=" + home, "LANG=C.UTF-8"}
}
