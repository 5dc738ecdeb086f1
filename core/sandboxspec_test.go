package core

import (
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/isolation"
)

func TestSandboxSpec(t *testing.T) {
	l := Limits{MemoryBytes: 1 << 20, MaxProcesses: 8, CPU: 1500 * time.Millisecond, MaxDiskBytes: 4 << 20, AllowNetwork: true, Isolation: "namespace"}
	s := l.SandboxSpec(l.Level(), []string{"/opt/x"})
	if s.Level != isolation.Namespace || s.MemoryBytes != 1<<20 || s.MaxProcesses != 8 || s.CPUSeconds != 2 ||
		s.DiskBytes != 4<<20 || s.FileSizeBytes != 4<<20 || !s.AllowNetwork || len(s.ReadOnlyPaths) != 1 {
		t.Errorf("SandboxSpec = %+v", s)
	}
	if s := (Limits{CPU: time.Millisecond}).SandboxSpec(isolation.Process, nil); s.CPUSeconds != 1 {
		t.Errorf("a CPU budget under a second: CPUSeconds = %d, want 1", s.CPUSeconds)
	}
	if got := (Limits{}).Level(); got != isolation.Default {
		t.Errorf("Level of no isolation = %q, want %q", got, isolation.Default)
	}
}
