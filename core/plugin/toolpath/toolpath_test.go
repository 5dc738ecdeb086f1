package toolpath

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestResolveRechecksAfterAMoment: a tool's answer is reused for a moment
// without looking at PATH again, and looked up afresh after it, so a tool
// removed (or installed, or switched) while a plugin serves is seen.
func TestResolveRechecksAfterAMoment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	exe := filepath.Join(dir, "rlm-toolpath-test")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	probes := 0
	probe := func(path string) (Tool, error) {
		probes++
		return Tool{Exe: path, Version: "1"}, nil
	}
	old := recheckAfter
	t.Cleanup(func() { recheckAfter = old })
	recheckAfter = time.Hour
	got, err := Resolve("rlm-toolpath-test", probe)
	if err != nil || got.Exe != exe || probes != 1 {
		t.Fatalf("first: %+v %v, %d probes", got, err, probes)
	}
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	if got, err := Resolve("rlm-toolpath-test", probe); err != nil || got.Exe != exe {
		t.Fatalf("within the moment: %+v %v", got, err)
	}
	recheckAfter = 0
	_, err = Resolve("rlm-toolpath-test", probe)
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("after the moment, the removed tool: %v", err)
	}
}
