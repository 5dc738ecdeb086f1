package capbuf

import (
	"bytes"
	"math/rand"
	"testing"
)

// reference computes what Buffer must return, the slow obvious way.
func reference(all []byte, max int) []byte {
	if len(all) <= max {
		return all
	}
	hm, tm := max-max/2, max/2
	out := append([]byte{}, all[:hm]...)
	out = append(out, Notice(int64(len(all)-hm-tm))...)
	return append(out, all[len(all)-tm:]...)
}

func TestMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 500; trial++ {
		max := 1 + rng.Intn(64)
		b := New(int64(max))
		var all []byte
		for w := rng.Intn(20); w > 0; w-- {
			p := make([]byte, rng.Intn(3*max))
			for i := range p {
				p[i] = byte('a' + rng.Intn(26))
			}
			all = append(all, p...)
			b.Write(p)
		}
		if got, want := b.Bytes(), reference(all, max); !bytes.Equal(got, want) {
			t.Fatalf("max=%d: got %q want %q", max, got, want)
		}
		kept := all
		if len(all) > max {
			kept = append(append([]byte{}, all[:max-max/2]...), all[len(all)-max/2:]...)
		}
		if got := b.Kept(); !bytes.Equal(got, kept) {
			t.Fatalf("max=%d: Kept %q want %q", max, got, kept)
		}
		if b.Omitted() != int64(len(all)-len(kept)) {
			t.Fatalf("max=%d: omitted %d want %d", max, b.Omitted(), len(all)-len(kept))
		}
		if b.Total() != int64(len(all)) {
			t.Fatalf("total %d want %d", b.Total(), len(all))
		}
	}
}

func TestFloodKeepsMemoryBounded(t *testing.T) {
	b := New(1000)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for i := 0; i < 160; i++ { // 10 MiB
		b.Write(chunk)
	}
	if cap(b.head) > 1000 || cap(b.tail) > 1000 {
		t.Fatalf("buffers grew: head %d tail %d", cap(b.head), cap(b.tail))
	}
	if om := b.Omitted(); om != 160*64<<10-1000 {
		t.Fatalf("omitted %d", om)
	}
	if !bytes.Contains(b.Bytes(), []byte("bytes omitted")) {
		t.Fatal("no omission notice")
	}
}

func BenchmarkWrite1MB(b *testing.B) {
	chunk := bytes.Repeat([]byte("y"), 4096)
	b.SetBytes(1 << 20)
	for i := 0; i < b.N; i++ {
		buf := New(DefaultMax / 4)
		for j := 0; j < 256; j++ {
			buf.Write(chunk)
		}
	}
}

func TestNegativeKeepsEverything(t *testing.T) {
	b := New(-1)
	chunk := bytes.Repeat([]byte("0123456789"), 1<<17) // 1.25 MiB, over DefaultMax
	b.Write(chunk)
	b.Write(chunk)
	if b.Omitted() != 0 || len(b.Bytes()) != 2*len(chunk) {
		t.Fatalf("omitted %d, kept %d of %d", b.Omitted(), len(b.Bytes()), 2*len(chunk))
	}
	if New(0).max != DefaultMax {
		t.Fatal("0 is not DefaultMax")
	}
}
