package compiled

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/plugin/native"
)

// TestConcurrentIdenticalSourcesCompileOnce runs 32 identical C programs at
// once through the runtime and counts the compiler's invocations with a
// wrapper gcc: one compiles, the others wait for it, all run.
func TestConcurrentIdenticalSourcesCompileOnce(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("gcc is required (Debian: apt-get install gcc; .ci/setup installs it): %v", err)
	}
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	counter := filepath.Join(dir, "compiles")
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// The probe's --version is not a compile; a call with -o is.
	wrapper := "#!/bin/sh\ncase \" $* \" in *' -o '*) echo x >> " + counter + ";; esac\nexec " + gcc + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "gcc"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	srv := native.New(C.Runtime())
	prog := core.Program{
		Code:   "#include <stdio.h>\nint main(void) { puts(\"same\"); return 0; }\n",
		Limits: core.Limits{Isolation: "none"},
	}
	const n = 32
	var wg sync.WaitGroup
	results := make([]*core.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = srv.Run(context.Background(), prog)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		if r := results[i]; r.Stdout != "same\n" || r.ExitCode != 0 || r.Compile == nil {
			t.Fatalf("run %d: stdout %q exit %d compile %v stderr %q", i, r.Stdout, r.ExitCode, r.Compile, r.Stderr)
		}
	}
	b, err := os.ReadFile(counter)
	if err != nil {
		t.Fatalf("the compiler never ran: %v", err)
	}
	if c := strings.Count(string(b), "x"); c != 1 {
		t.Errorf("%d identical concurrent sources compiled %d times, want 1", n, c)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "cache", "rlm", "compile", "c"))
	if len(ents) != 1 {
		t.Errorf("cache holds %d entries, want 1 (no temporary left): %v", len(ents), ents)
	}
}

func TestKeyCoversFlagsFilesAndLimits(t *testing.T) {
	p := core.Program{Code: "int main(){}"}
	k := Key("c", "/usr/bin/gcc", "gcc 12", []string{"-O2"}, p, 1, 2)
	if k != Key("c", "/usr/bin/gcc", "gcc 12", []string{"-O2"}, p, 1, 2) {
		t.Error("same inputs, two keys")
	}
	q := p
	q.Files = []core.File{{Path: "a.h", Data: []byte("#define X 1")}}
	for name, other := range map[string]string{
		"flags":   Key("c", "/usr/bin/gcc", "gcc 12", []string{"-O0"}, p, 1, 2),
		"version": Key("c", "/usr/bin/gcc", "gcc 13", []string{"-O2"}, p, 1, 2),
		"files":   Key("c", "/usr/bin/gcc", "gcc 12", []string{"-O2"}, q, 1, 2),
		"timeout": Key("c", "/usr/bin/gcc", "gcc 12", []string{"-O2"}, p, 9, 2),
	} {
		if other == k {
			t.Errorf("a different %s shares the key", name)
		}
	}
}
