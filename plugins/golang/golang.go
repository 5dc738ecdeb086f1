// Package golang is the Go runtime: a program is main.go, compiled with the
// go toolchain into a cached binary which then runs with the request's
// stdin, args and environment.
//
// # Notes
//
//   - The code is compiled as it is: it must say `package main` and have a
//     func main; nothing is added. Only main.go is compiled; other files in
//     the request are data. The standard library is all there is (GOPROXY
//     is off, so no module downloads, and cgo is disabled).
//   - `go build`, not `go run`: go run turns every non-zero exit into 1 and
//     prints "exit status N", hiding the program's own status and signal.
//   - Builds share one GOCACHE ($XDG_CACHE_HOME/rlm/go/build, or $GOCACHE
//     when the plugin's own environment sets it), so only the first program
//     ever compiles the standard library; binaries are kept
//     under rlm/go/bin by a hash of the toolchain version and the code, so
//     running the same program again skips the compiler entirely. Binaries
//     not run for BinaryTTL are removed when a new one is built.
//   - The build has its own time limit: Limits.install_timeout_ms when set,
//     else DefaultBuildTimeout; the program's wall limit starts afterwards.
//   - A compile error ends the run before it starts: the compiler's messages
//     on stderr, its exit status (1), and error "compilation failed".
package golang

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
	"github.com/rlmkit/rlm/plugins/internal/inproc"
)

// DefaultBuildTimeout bounds a compilation when the request sets no
// install_timeout_ms. A cold GOCACHE (the standard library compiled for the
// first time) takes 10-20 s on an idle two-core machine, minutes on a busy one.
const DefaultBuildTimeout = defaults.InstallTimeout

// Probe reports the toolchain as `go version` prints it
// ("go version go1.26.8 linux/amd64").
// GOTOOLCHAIN=local: a go.mod in the current directory asking for a newer
// toolchain must not make the probe download one.
func Probe(path string) (toolpath.Tool, error) {
	cmd := exec.Command(path, "version")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return toolpath.Tool{}, fmt.Errorf("%s version: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return toolpath.Tool{Exe: path, Version: strings.TrimSpace(v)}, nil
}

// cacheDir is rlm's directory for Go builds.
func cacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "rlm", "go")
}

// BinaryPath is where the compiled program for code lives.
func BinaryPath(t toolpath.Tool, code string) string {
	h := sha256.New()
	fmt.Fprintf(h, "rlm-go-v1\x00%s\x00%s\x00%s/%s\x00", t.Exe, t.Version, runtime.GOOS, runtime.GOARCH)
	h.Write([]byte(code))
	return filepath.Join(cacheDir(), "bin", hex.EncodeToString(h.Sum(nil))[:32])
}

// buildEnv is the compiler's environment: scrubbed like a program's, with
// the shared caches, no network and no toolchain switching.
func buildEnv() []string {
	c := cacheDir()
	gocache := os.Getenv("GOCACHE")
	if gocache == "" || !filepath.IsAbs(gocache) {
		gocache = filepath.Join(c, "build")
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{
		"PATH=" + path,
		"HOME=" + filepath.Join(c, "home"),
		"LANG=C.UTF-8",
		"GOCACHE=" + gocache,
		"GOPATH=" + filepath.Join(c, "path"),
		"GOENV=off",
		"GOFLAGS=",
		"GOTOOLCHAIN=local",
		"GOPROXY=off",
		"GO111MODULE=",
		"CGO_ENABLED=0",
		"GOTELEMETRY=off",
	}
}

// build compiles the workspace's main.go unless its binary is cached. A
// non-nil result is a failed build, returned instead of running.
func build(ctx context.Context, t toolpath.Tool, ws *program.Workspace, p core.Program, _ []string) (*core.Result, error) {
	bin := BinaryPath(t, p.Code)
	if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
		now := time.Now()
		_ = os.Chtimes(bin, now, now) // recently used: kept by sweep
		return nil, nil
	}
	if res := checkPackage(p.Code); res != nil {
		return res, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return nil, status.Errorf(codes.Internal, "creating the Go binary cache: %v", err)
	}
	for _, d := range []string{"home", "build", "path"} {
		_ = os.MkdirAll(filepath.Join(cacheDir(), d), 0o755)
	}
	// Concurrent builds of one program each write their own file and
	// rename it into place; the last rename wins with identical content.
	tmp := fmt.Sprintf("%s.tmp-%d-%d", bin, os.Getpid(), time.Now().UnixNano())
	defer os.Remove(tmp)
	wall := p.Limits.InstallTimeout
	if wall <= 0 {
		wall = DefaultBuildTimeout
	}
	res, err := program.Exec(ctx, program.Command{
		Argv:   []string{t.Exe, "build", "-trimpath", "-o", tmp, filepath.Base(ws.CodePath)},
		Dir:    ws.Dir,
		Env:    buildEnv(),
		Limits: p.Limits,
		Wall:   wall,
	})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "running the Go compiler: %v", err)
	}
	if res.EndedBy == ending.Exit && res.ExitCode == 0 {
		if err := os.Rename(tmp, bin); err != nil {
			return nil, status.Errorf(codes.Internal, "caching the Go binary: %v", err)
		}
		sweep(filepath.Dir(bin), time.Now().Add(-BinaryTTL))
		return nil, nil
	}
	// The program never ran: the compiler (trusted, and unsandboxed) did,
	// so the result claims no level; the host reports the requested one.
	res.Isolation = ""
	switch res.EndedBy {
	case ending.Timeout:
		res.Error = core.InstallTimedOut("compilation", wall)
	case ending.Exit:
		res.Error = "compilation failed"
		if strings.Contains(res.Stderr, "expected 'package'") {
			res.Error = "compilation failed: the code must start with `package main` and define func main"
		}
	}
	return res, nil
}

// BinaryTTL is how long a cached binary nobody ran is kept; each new build
// removes older ones, so the cache does not grow without bound.
const BinaryTTL = 14 * 24 * time.Hour

// sweep removes cached binaries (and abandoned temporary files) last used
// before cutoff. A program still running from a removed binary is not
// affected: its inode lives until it exits.
func sweep(dir string, cutoff time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && info.ModTime().Before(cutoff) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// checkPackage refuses code that parses but is not package main: go build
// would quietly compile such a package into an archive that cannot run.
// Code that does not parse is left to the compiler, whose message is better.
func checkPackage(code string) *core.Result {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", code, parser.PackageClauseOnly)
	if err != nil || f.Name.Name == "main" {
		return nil
	}
	msg := fmt.Sprintf("main.go: package %s is not a main package: the code must say `package main` and define func main (rlm adds no boilerplate)\n", f.Name.Name)
	return &core.Result{
		Stderr:   msg,
		ExitCode: 1,
		EndedBy:  ending.Exit,
		Error:    "compilation failed: not package main",
	}
}

// Runtime describes Go for core/plugin/native.
var Runtime = &native.Runtime{
	Name:     "golang",
	Language: "go",
	Ext:      ".go",
	CodeFile: "main.go",
	Tool:     "go",
	Probe:    Probe,
	Prepare:  build,
	Argv: func(t toolpath.Tool, ws *program.Workspace, p core.Program) []string {
		return append([]string{BinaryPath(t, p.Code)}, p.Args...)
	},
	Sandbox:      &inproc.Sandbox{},
	Capabilities: []string{"program", "check", "files"},
	Syntax:       syntax,
}

// syntax parses the code with gofmt -e (syntax only; types are not
// checked), the gofmt of the toolchain that builds it.
func syntax(t toolpath.Tool) (native.SyntaxCheck, error) {
	gofmt := filepath.Join(filepath.Dir(t.Exe), "gofmt")
	if _, err := os.Stat(gofmt); err != nil {
		if gofmt, err = exec.LookPath("gofmt"); err != nil {
			return native.SyntaxCheck{}, fmt.Errorf("gofmt not found beside %s or in PATH; it ships with the Go toolchain", t.Exe)
		}
	}
	return native.SyntaxCheck{Exe: gofmt, Args: []string{"-e"}, ShowAs: "main.go"}, nil
}

// New returns the golang runtime service.
func New() *native.Server { return native.New(Runtime) }

// Main is the plugin binary's entry point.
func Main() {
	native.Serve(New())
}
