package isolate

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSharedCountersKeepTheirDescriptors: a warm sandbox's counters are
// read through descriptors opened once (each read sees the file as it is
// now), written through them too, and nothing is read once Close has run.
func TestSharedCountersKeepTheirDescriptors(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "pids.events")
	if err := os.WriteFile(events, []byte("max 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := &sharedState{fds: map[string]int{}}
	if got := keyedValue(sh.read(events), "max"); got != 0 {
		t.Fatalf("max = %d, want 0", got)
	}
	if err := os.WriteFile(events, []byte("max 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := keyedValue(sh.read(events), "max"); got != 3 {
		t.Fatalf("max after the file changed = %d, want 3", got)
	}
	peak := filepath.Join(dir, "memory.max_usage_in_bytes")
	if err := os.WriteFile(peak, []byte("123456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sh.write(peak, "0"); err != nil {
		t.Fatal(err)
	}
	if got := parseInt(sh.read(peak)); got != 23456 && got != 0 {
		// A regular file keeps the rest of the old line; a cgroup's reads 0.
		t.Fatalf("after the reset: %d", got)
	}
	if len(sh.fds) != 3 {
		t.Fatalf("%d descriptors for two files read and one written, want 3", len(sh.fds))
	}
	(&Cgroups{shared: sh}).Close()
	if b := sh.read(events); b != nil {
		t.Fatalf("read after Close: %q", b)
	}
	if sh.write(peak, "0") == nil {
		t.Fatal("write after Close succeeded")
	}
}

func TestKeyedValue(t *testing.T) {
	b := []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
	if got := keyedValue(b, "oom_kill"); got != 2 {
		t.Fatalf("oom_kill = %d", got)
	}
	if got := keyedValue(b, "missing"); got != 0 {
		t.Fatalf("missing = %d", got)
	}
	if got := keyedValue(nil, "oom_kill"); got != 0 {
		t.Fatalf("nil = %d", got)
	}
}
