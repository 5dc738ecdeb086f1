package core

import (
	"slices"
	"testing"
	"time"
)

// Each resource limit has one name, shared by its flag, its [limits] key
// and the capability a plugin declares; Set finds the limits given.
func TestResources(t *testing.T) {
	for _, name := range []string{"memory", "max-processes", "max-disk", "cpu"} {
		r := ResourceNamed(name)
		if r == 0 || !slices.Equal(r.Names(), []string{name}) {
			t.Errorf("%s: ResourceNamed gives %v, named %v", name, r, r.Names())
		}
	}
	if ResourceNamed("fuel") != 0 {
		t.Error("fuel is not a resource limit")
	}
	if got := (DiskLimit | MemoryLimit).Flags(); got != "--memory, --max-disk" {
		t.Errorf("Flags = %q", got)
	}
	l := Limits{MemoryBytes: 1, CPU: time.Second}
	if got := l.Set(); got != MemoryLimit|CPULimit {
		t.Errorf("Set = %v, want memory and cpu", got.Names())
	}
	if (Limits{}).Set() != 0 {
		t.Error("zero limits set some")
	}
}
