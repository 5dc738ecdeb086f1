//go:build unix

package memalloc

import "testing"

func TestLimit(t *testing.T) {
	a := &Allocator{Limit: 4 << 16}
	m := a.Allocate(0, 1<<32)
	defer m.Free()
	b := m.Reallocate(1 << 16)
	if len(b) != 1<<16 {
		t.Fatalf("len = %d", len(b))
	}
	b[0] = 42
	b = m.Reallocate(4 << 16)
	if len(b) != 4<<16 || b[0] != 42 {
		t.Fatal("grow lost contents or length")
	}
	b[len(b)-1] = 1
	if a.Refused() {
		t.Fatal("refused within the limit")
	}
	if m.Reallocate(5<<16) != nil || !a.Refused() {
		t.Fatal("grow past the limit was not refused")
	}
	if a.Peak() != 4<<16 {
		t.Fatalf("peak = %d", a.Peak())
	}
}
