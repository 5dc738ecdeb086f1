package client

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A binary replaced at its path (rename over it, as go build and package
// managers do), rewritten in place or removed is a changed binary; one left
// alone is not.
func TestBinaryStampChanged(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "rlm-plugin-x")
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(bin, "one")
	b := stampOf(&Runtime{Plugin: bin})
	if b == nil || b.changed() {
		t.Fatalf("fresh stamp %v: changed", b)
	}

	write(bin+".new", "two")
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	if !b.changed() {
		t.Error("a binary renamed over the launched one is not seen as changed")
	}

	b = stampOf(&Runtime{Plugin: bin})
	later := time.Now().Add(time.Minute)
	write(bin, "two") // same size, in place
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	if !b.changed() {
		t.Error("a binary rewritten in place is not seen as changed")
	}

	b = stampOf(&Runtime{Plugin: bin})
	os.Remove(bin)
	if !b.changed() {
		t.Error("a removed binary is not seen as changed")
	}
	if stampOf(&Runtime{}) != nil || (*binaryStamp)(nil).changed() {
		t.Error("a runtime without a binary has a stamp")
	}
}

// What the check costs each request of serve and the daemon (one stat).
func BenchmarkBinaryStampChanged(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "rlm-plugin-x")
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		b.Fatal(err)
	}
	s := stampOf(&Runtime{Plugin: bin})
	for b.Loop() {
		if s.changed() {
			b.Fatal("changed")
		}
	}
}
