package isolate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNamespaceProbeRemembered: a passed probe is remembered on disk, so a
// new process (here: the in-process cache reset) does not run bubblewrap
// again; a failed probe is not, so the next process probes again.
func TestNamespaceProbeRemembered(t *testing.T) {
	requireLevel(t, LevelNamespace)
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox's user (65534 under root) runs the wrapper and logs.
	bin, err := os.MkdirTemp("", "rlm-probe-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	log := filepath.Join(bin, "calls")
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(log, 0o666)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	wrapper := func(body string) {
		t.Helper()
		f := filepath.Join(bin, "bwrap")
		os.Remove(f) // a new inode and mtime: another executable to the cache
		if err := os.WriteFile(f, []byte("#!/bin/sh\necho \"$*\" >> "+log+"\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	calls := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n")
	}
	probe := func() error {
		availMu.Lock()
		delete(availCache, LevelNamespace)
		availMu.Unlock()
		return Available(LevelNamespace)
	}

	wrapper(`exec ` + real + ` "$@"`)
	if err := probe(); err != nil {
		t.Fatalf("first probe: %v", err)
	}
	first := calls()
	if first == 0 {
		t.Fatal("the first probe did not run bubblewrap")
	}
	if err := probe(); err != nil {
		t.Fatalf("second probe: %v", err)
	}
	if n := calls(); n != first {
		t.Fatalf("the second probe ran bubblewrap again (%d calls, then %d): the pass was not remembered", first, n)
	}

	// A bwrap that cannot start sandboxes: refused, and asked again next time.
	wrapper(`case "$1" in --version) exec ` + real + ` --version;; esac; echo "bwrap: No permissions to create new namespace" >&2; exit 1`)
	for i := 0; i < 2; i++ {
		before := calls()
		err := probe()
		if err == nil || !strings.Contains(err.Error(), "cannot start a sandbox") {
			t.Fatalf("probe %d with a failing bwrap: %v, want a refusal", i, err)
		}
		if calls() == before {
			t.Fatalf("probe %d with a failing bwrap did not run it: a failure was remembered", i)
		}
	}
	t.Setenv("PATH", strings.TrimPrefix(os.Getenv("PATH"), bin+":"))
	if err := probe(); err != nil { // leave the process cache as the real host has it
		t.Fatal(err)
	}
}
