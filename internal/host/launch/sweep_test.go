package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSweepStaleDirs: the plugin directories of a host that is gone (a
// daemon killed with SIGKILL) are removed by the next host; those of a live
// host and unrelated directories stay.
func TestSweepStaleDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string) string {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ws", "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dead := mk(fmt.Sprintf("rlm-plugin-%d-123", gone.Process.Pid))
	live := mk(fmt.Sprintf("rlm-plugin-%d-456", os.Getppid()))
	old := mk("rlm-plugin-789")
	other := mk("rlm-plugins-notes")
	sweepStaleDirs()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("%s of a host that is gone was not removed (%v)", dead, err)
	}
	for _, dir := range []string{live, old, other} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s was removed: %v", dir, err)
		}
	}
}
