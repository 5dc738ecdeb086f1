package golang

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

func TestBinaryPathIsKeyedByToolchainAndCode(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	a := toolpath.Tool{Exe: "/usr/local/go/bin/go", Version: "go version go1.26.8 linux/amd64"}
	b := toolpath.Tool{Exe: "/usr/local/go/bin/go", Version: "go version go1.27.0 linux/amd64"}
	p := BinaryPath(a, "package main\nfunc main() {}\n")
	if p != BinaryPath(a, "package main\nfunc main() {}\n") {
		t.Error("the same code and toolchain gave two paths")
	}
	if p == BinaryPath(a, "package main\nfunc main() { println() }\n") {
		t.Error("different code shares a binary")
	}
	if p == BinaryPath(b, "package main\nfunc main() {}\n") {
		t.Error("a new toolchain reuses an old binary")
	}
}

func TestCheckPackage(t *testing.T) {
	if r := checkPackage("package main\nfunc main() {}\n"); r != nil {
		t.Errorf("package main refused: %s", r.Stderr)
	}
	if r := checkPackage("func main() {}"); r != nil {
		t.Error("unparsable code must be left to the compiler's message")
	}
	r := checkPackage("// doc\npackage tools\n")
	if r == nil || r.ExitCode != 1 || r.EndedBy != ending.Exit ||
		!strings.Contains(r.Stderr, "package tools is not a main package") {
		t.Errorf("package tools: %v", r)
	}
}

func TestSweepRemovesOnlyStaleBinaries(t *testing.T) {
	dir := t.TempDir()
	old, fresh := filepath.Join(dir, "old"), filepath.Join(dir, "fresh")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("bin"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * BinaryTTL)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	sweep(dir, time.Now().Add(-BinaryTTL))
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("stale binary kept (%v)", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh binary removed: %v", err)
	}
}
