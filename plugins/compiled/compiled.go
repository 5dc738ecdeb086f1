// Package compiled is the runtimes of compiled languages other than Go: C
// (gcc), C++ (g++), Java (javac + java) and Rust (rustc). One body serves
// all four; each Lang says only how its compiler is called and how its
// output runs.
//
// # Notes
//
//   - Compile once per distinct source: the output is cached under
//     $XDG_CACHE_HOME/rlm/compile/<lang>/<key>, the key a hash of the
//     compiler, its version, the flags, the code, the request's files and
//     the compile limits (Key). Identical concurrent requests in one
//     plugin process share one compilation; across processes the entry is
//     renamed into place, so the last complete copy wins.
//   - The compiler processes untrusted source, so it runs in the same
//     sandbox, at the same isolation level, as the program: in the
//     workspace, writing to .rlm-build there, which is copied into the
//     cache and removed before the run.
//   - Compile limits are separate from the run's, in the one Limits type:
//     the wall clock is Limits.install_timeout_ms (DefaultCompileTimeout
//     when unset), memory is the larger of the run's and CompileMemory;
//     the program's own limits start after.
//   - The compile step is reported as Result.Compile (exec --json:
//     "compile", with "cached" on a cache hit). A failed compile ends the
//     run before it starts: the compiler's messages on stderr, its exit
//     status, error "compilation failed" (or the compile timeout).
//   - Java: the code must declare its class as `Main` (public or not), as
//     SandboxFusion and most judges require; it is compiled from Main.java
//     and run as `java -cp <cache> Main`.
package compiled

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
	"github.com/rlmkit/rlm/plugins/internal/inproc"
)

// DefaultCompileTimeout bounds a compilation when the request sets no
// install_timeout_ms.
const DefaultCompileTimeout = defaults.InstallTimeout

// CompileMemory is the least memory a compiler gets: rustc and javac need
// far more than a judged program is usually allowed.
const CompileMemory = 2 << 30

// buildDir is the compiler's output directory inside the workspace.
const buildDir = ".rlm-build"

// Lang is one compiled language.
type Lang struct {
	Name, Language, Ext, CodeFile, Tool string
	Flags                               []string
	// Probe finds the compiler's version (and, for rustc, its real path).
	Probe toolpath.Probe
	// CompileArgv compiles src (relative to the workspace) into out.
	CompileArgv func(t toolpath.Tool, flags []string, src, out string) []string
	// RunArgv runs the artifact in dir.
	RunArgv func(t toolpath.Tool, dir string, args []string) []string

	cache Cache
}

// versionProbe reports the first line of `exe --version`.
var versionProbe = toolpath.VersionLine("--version")

// binary runs a native executable named main.
func binary(_ toolpath.Tool, dir string, args []string) []string {
	return append([]string{filepath.Join(dir, "main")}, args...)
}

// C is gcc.
var C = &Lang{
	Name: "c", Language: "c", Ext: ".c", CodeFile: "main.c", Tool: "gcc",
	Flags: []string{"-O2", "-std=gnu17", "-pipe", "-lm"},
	Probe: versionProbe,
	CompileArgv: func(t toolpath.Tool, flags []string, src, out string) []string {
		return append([]string{t.Exe, "-o", filepath.Join(out, "main"), src}, flags...)
	},
	RunArgv: binary,
}

// CPP is g++.
var CPP = &Lang{
	Name: "cpp", Language: "cpp", Ext: ".cpp", CodeFile: "main.cpp", Tool: "g++",
	Flags:       []string{"-O2", "-std=gnu++17", "-pipe", "-lm"},
	Probe:       versionProbe,
	CompileArgv: C.CompileArgv,
	RunArgv:     binary,
}

// Java is javac, and the java beside it.
var Java = &Lang{
	Name: "java", Language: "java", Ext: ".java", CodeFile: "Main.java", Tool: "javac",
	Flags: []string{"-encoding", "UTF-8"},
	Probe: func(path string) (toolpath.Tool, error) {
		t, err := versionProbe(path)
		if err != nil {
			return t, err
		}
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return t, err
		}
		java := filepath.Join(filepath.Dir(real), "java")
		if _, err := os.Stat(java); err != nil {
			return t, fmt.Errorf("no java beside %s: install a JDK (Debian: default-jdk-headless)", real)
		}
		prefix := filepath.Dir(filepath.Dir(real))
		t.Extra = map[string]string{"java": java, "prefix": prefix}
		// Debian keeps the JDK's conf/ (java.security) under /etc.
		if conf, err := filepath.EvalSymlinks(filepath.Join(prefix, "conf", "security", "java.security")); err == nil {
			t.Extra["readonly"] = filepath.Dir(filepath.Dir(conf))
		}
		return t, nil
	},
	CompileArgv: func(t toolpath.Tool, flags []string, src, out string) []string {
		return append(append([]string{t.Exe, "-J-Xss16m", "-d", out}, flags...), src)
	},
	RunArgv: func(t toolpath.Tool, dir string, args []string) []string {
		return append([]string{t.Extra["java"], "-Xshare:auto", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", dir, "Main"}, args...)
	},
}

// Rust is rustc. A rustup proxy (~/.cargo/bin/rustc) is resolved to the
// toolchain's own rustc, whose sysroot the sandbox then shows.
var Rust = &Lang{
	Name: "rust", Language: "rust", Ext: ".rs", CodeFile: "main.rs", Tool: "rustc",
	Flags: []string{"-O", "--edition", "2021"},
	Probe: func(path string) (toolpath.Tool, error) {
		t, err := versionProbe(path)
		if err != nil {
			return t, err
		}
		out, err := exec.Command(path, "--print", "sysroot").Output()
		if err != nil {
			return t, fmt.Errorf("%s --print sysroot: %v", path, err)
		}
		root := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(root, "bin", "rustc")); err == nil {
			t.Exe = filepath.Join(root, "bin", "rustc")
		}
		t.Extra = map[string]string{"prefix": root}
		return t, nil
	},
	CompileArgv: func(t toolpath.Tool, flags []string, src, out string) []string {
		return append(append([]string{t.Exe, "-o", filepath.Join(out, "main")}, flags...), src)
	},
	RunArgv: binary,
}

// cacheDir is the language's compile cache.
func (l *Lang) cacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "rlm", "compile", l.Name)
}

// compileLimits are the run's limits with the compile step's own wall
// clock and memory.
func compileLimits(l core.Limits) (core.Limits, int64) {
	wall := l.InstallTimeout
	if wall <= 0 {
		wall = DefaultCompileTimeout
	}
	l.Wall, l.CPU = wall, 0
	l.MemoryBytes = max(l.MemoryBytes, CompileMemory)
	l.MaxProcesses = max(l.MaxProcesses, 64)
	l.MaxFileBytes, l.MaxDiskBytes = 0, 0
	return l, int64(wall)
}

func (l *Lang) key(t toolpath.Tool, p core.Program) string {
	cl, wall := compileLimits(p.Limits)
	return Key(l.Name, t.Exe, t.Version, l.Flags, p, wall, cl.MemoryBytes)
}

// compile is the Runtime's Compile: a cache hit, or one compilation in the
// program's sandbox.
func (l *Lang) compile(ctx context.Context, b native.Build) (*core.CompileResult, string, error) {
	key := l.key(b.Tool, b.Program)
	if dir, ok := l.cache.Lookup(key); ok {
		return &core.CompileResult{EndedBy: ending.Exit, Cached: true}, dir, nil
	}
	res, dir, err := l.cache.Do(key, func() (*core.CompileResult, string, error) { return l.build(ctx, b) })
	if err != nil || res == nil {
		return res, dir, err
	}
	// Waiters share the leader's result: give each its own copy, which
	// the host may change.
	c := *res
	return &c, dir, nil
}

// build runs the compiler in the workspace. It returns the directory of
// the output, or "" when the compile failed.
func (l *Lang) build(ctx context.Context, b native.Build) (*core.CompileResult, string, error) {
	if dir, ok := l.cache.Lookup(l.key(b.Tool, b.Program)); ok {
		return &core.CompileResult{EndedBy: ending.Exit, Cached: true}, dir, nil
	}
	out := filepath.Join(b.WS.Dir, buildDir)
	if err := os.Mkdir(out, 0o777); err != nil {
		return nil, "", status.Errorf(codes.Internal, "creating the build directory: %v", err)
	}
	_ = os.Chmod(out, 0o777) // the sandboxed compiler may run as another user
	limits, _ := compileLimits(b.Program.Limits)
	env := append(program.BaseEnv(b.WS.Dir), "TMPDIR="+out)
	var sp program.Spawner
	if level := b.Program.Limits.Level(); level != isolation.None {
		sp = b.Sandbox.Spawner(ctx, native.SandboxRun{
			Spec:   limits.SandboxSpec(level, native.ReadOnlyPaths(b.Tool, b.ReadOnly...)),
			Tool:   b.Tool,
			Limits: limits,
		})
	}
	res, err := program.Exec(ctx, program.Command{
		Argv:    l.CompileArgv(b.Tool, l.Flags, filepath.Base(b.WS.CodePath), buildDir),
		Dir:     b.WS.Dir,
		Env:     env,
		Limits:  limits,
		Wall:    limits.Wall,
		Spawner: sp,
	})
	if err != nil {
		os.RemoveAll(out)
		return nil, "", status.Errorf(codes.Internal, "running the %s compiler: %v", l.Name, err)
	}
	if res.EndedBy == ending.Exit && res.ExitCode == 0 {
		// The caller stores out in the cache; the workspace must not
		// show it as produced files, so it is removed after (Runtime).
		return core.CompileOf(res), out, nil
	}
	os.RemoveAll(out)
	switch res.EndedBy {
	case ending.Timeout:
		res.Error = core.InstallTimedOut("compilation", limits.Wall)
	default:
		res.Error = "compilation failed"
	}
	return core.CompileOf(res), "", nil
}

// Runtime describes the language for core/plugin/native.
func (l *Lang) Runtime() *native.Runtime {
	l.cache.Dir = l.cacheDir()
	return &native.Runtime{
		Name: l.Name, Language: l.Language, Ext: l.Ext, CodeFile: l.CodeFile, Tool: l.Tool,
		Probe: l.Probe,
		Compile: func(ctx context.Context, b native.Build) (*core.CompileResult, string, error) {
			res, dir, err := l.compile(ctx, b)
			os.RemoveAll(filepath.Join(b.WS.Dir, buildDir))
			return res, dir, err
		},
		Argv: func(t toolpath.Tool, ws *program.Workspace, p core.Program) []string {
			return l.RunArgv(t, l.cache.Path(l.key(t, p)), p.Args)
		},
		Sandbox:      &inproc.Sandbox{},
		Capabilities: []string{"program", "files"},
	}
}

// Main is a plugin binary's entry point.
func Main(l *Lang) { native.Serve(native.New(l.Runtime())) }
