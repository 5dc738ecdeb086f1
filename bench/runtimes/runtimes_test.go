// Package runtimes benchmarks a hello world in every runtime through
// `rlm exec` against invoking the interpreter directly, in the same run, and
// a Go program's first run (compiled) against its second (cached binary).
//
//	go test -run '^$' -bench . -benchtime 50x ./bench/runtimes/
//
// TestMain builds rlm and the plugins into a temporary directory first, so
// the figures are for the binaries of this checkout.
package runtimes

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var (
	bin string
	// python is the real interpreter behind python3: a pyenv shim costs
	// ~170 ms a start, which rlm avoids by resolving it once, so comparing
	// against the shim would flatter rlm.
	python = "python3"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run()) // no benchmarks asked for: nothing to build
	}
	dir, err := os.MkdirTemp("", "rlm-bench-runtimes-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	if out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output(); err == nil && len(out) > 1 {
		python = string(out[:len(out)-1])
	}
	build := exec.Command("go", "build", "-trimpath", "-o", dir+"/",
		"./cmd/rlm", "./plugins/python/cmd/rlm-plugin-python", "./plugins/node/cmd/rlm-plugin-node",
		"./plugins/golang/cmd/rlm-plugin-golang", "./plugins/shell/cmd/rlm-plugin-shell")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building rlm:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

type runtimeCase struct {
	name   string
	file   string
	code   string
	direct func(dir, file string) []string // the interpreter invoked directly
}

var cases = []runtimeCase{
	{"python", "hello.py", `print("hello world")` + "\n", func(_, f string) []string { return []string{python, f} }},
	{"node", "hello.js", `console.log("hello world")` + "\n", func(_, f string) []string { return []string{"node", f} }},
	{"golang", "hello.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello world\") }\n",
		func(_, f string) []string { return []string{"go", "run", f} }},
	{"shell", "hello.sh", "echo hello world\n", func(_, f string) []string { return []string{"bash", f} }},
}

func run(b *testing.B, dir string, argv ...string) time.Duration {
	b.Helper()
	return runEnv(b, dir, nil, argv...)
}

// cleanEnv is the environment rlm gives programs (PATH, HOME in a private
// directory, LANG), so a direct run is compared on equal terms: on this
// machine NODE_EXTRA_CA_CERTS alone adds ~100 ms to every node start.
func cleanEnv(home string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"}
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil && len(out) > 1 {
		env = append(env, "GOCACHE="+string(out[:len(out)-1])) // go run: the warm build cache
	}
	return env
}

func runEnv(b *testing.B, dir string, env []string, argv ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil || string(out) != "hello world\n" {
		b.Fatalf("%v: %v: %q", argv, err, out)
	}
	return d
}

// BenchmarkHello runs a hello world through rlm exec and directly, one after
// the other in each iteration, and reports both medians and their ratio.
func BenchmarkHello(b *testing.B) {
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			file := filepath.Join(dir, c.file)
			if err := os.WriteFile(file, []byte(c.code), 0o644); err != nil {
				b.Fatal(err)
			}
			rlm := []string{filepath.Join(bin, "rlm"), "exec", "-r", c.name, file}
			env := cleanEnv(b.TempDir())
			// Warm up: tool probes, the Go build cache and binary.
			run(b, dir, rlm...)
			runEnv(b, dir, env, c.direct(dir, file)...)
			b.ResetTimer()
			var viaRLM, direct []time.Duration
			for i := 0; i < b.N; i++ {
				viaRLM = append(viaRLM, run(b, dir, rlm...))
				direct = append(direct, runEnv(b, dir, env, c.direct(dir, file)...))
			}
			report(b, "rlm", viaRLM, "direct", direct)
		})
	}
}

// BenchmarkGolangFirstVsSecond times a new Go program's first run (compiled,
// with the shared GOCACHE warm) and its second (the cached binary).
func BenchmarkGolangFirstVsSecond(b *testing.B) {
	dir := b.TempDir()
	rlm := filepath.Join(bin, "rlm")
	// Warm the shared GOCACHE so "first" measures compiling the program,
	// not the standard library.
	warm := filepath.Join(dir, "warm.go")
	_ = os.WriteFile(warm, []byte(cases[2].code), 0o644)
	run(b, dir, rlm, "exec", "-r", "golang", warm)
	b.ResetTimer()
	var first, second []time.Duration
	stamp := time.Now().UnixNano()
	for i := 0; i < b.N; i++ {
		// A program no earlier run has compiled: its binary is not cached.
		code := fmt.Sprintf("package main\n\nimport \"fmt\"\n\nconst id = %d\n\nfunc main() { _ = id; fmt.Println(\"hello world\") }\n", stamp+int64(i))
		f := filepath.Join(dir, fmt.Sprintf("p%d.go", i))
		if err := os.WriteFile(f, []byte(code), 0o644); err != nil {
			b.Fatal(err)
		}
		first = append(first, run(b, dir, rlm, "exec", "-r", "golang", f))
		second = append(second, run(b, dir, rlm, "exec", "-r", "golang", f))
	}
	report(b, "first", first, "second", second)
}

// report gives the medians of two interleaved series and their ratio:
// medians, because on a shared machine a few runs stall for seconds.
func report(b *testing.B, an string, a []time.Duration, bn string, bs []time.Duration) {
	ma, mb := median(a), median(bs)
	b.ReportMetric(float64(ma.Microseconds())/1000, an+"-p50-ms")
	b.ReportMetric(float64(mb.Microseconds())/1000, bn+"-p50-ms")
	b.ReportMetric(float64(ma)/float64(mb), an+"/"+bn)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
