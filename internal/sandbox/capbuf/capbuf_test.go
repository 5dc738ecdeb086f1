package capbuf

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
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

// A cut never splits a multi-byte character: the piece of one that the gap
// would leave at either side is dropped with the middle and counted.
func TestCutsAtUTF8Boundaries(t *testing.T) {
	b := New(8) // head 4 bytes, tail 4
	b.Write([]byte("aaéé" + strings.Repeat("-", 20) + "ééb"))
	if got, want := string(b.Kept()), "aaé"+"éb"; got != want {
		t.Fatalf("Kept %q want %q", got, want)
	}
	if om := b.Omitted(); om != int64(len("aaéé"+strings.Repeat("-", 20)+"ééb")-len("aaééb")) {
		t.Fatalf("omitted %d", om)
	}
	if got, want := string(b.Bytes()), "aaé"+Notice(b.Omitted())+"éb"; got != want {
		t.Fatalf("Bytes %q want %q", got, want)
	}

	// Output that fits is never touched, even when it ends mid-character.
	b = New(8)
	b.Write([]byte("abcdefg\xc3"))
	if got := b.Bytes(); string(got) != "abcdefg\xc3" || b.Omitted() != 0 {
		t.Fatalf("fitting output changed: %q", got)
	}
}

func TestUTF8CutMatchesReference(t *testing.T) {
	runes := []string{"a", "é", "✓", "𝄞"} // 1 to 4 bytes
	rng := rand.New(rand.NewSource(2))
	for trial := 0; trial < 500; trial++ {
		max := 1 + rng.Intn(40)
		b := New(int64(max))
		var all []byte
		for w := rng.Intn(10); w > 0; w-- {
			var p []byte
			for n := rng.Intn(2 * max); n > 0; n-- {
				p = append(p, runes[rng.Intn(len(runes))]...)
			}
			// write in random pieces, splitting characters between writes
			for len(p) > 0 {
				k := 1 + rng.Intn(len(p))
				b.Write(p[:k])
				all, p = append(all, p[:k]...), p[k:]
			}
		}
		kept, om := b.Kept(), b.Omitted()
		if !utf8.Valid(kept) || !utf8.Valid(b.Bytes()) {
			t.Fatalf("max=%d: invalid UTF-8 %q from %q", max, kept, all)
		}
		if len(all) <= max {
			if !bytes.Equal(kept, all) || om != 0 {
				t.Fatalf("max=%d: fitting output changed: %q", max, kept)
			}
			continue
		}
		// head: the longest whole-character prefix of the head budget, tail
		// likewise; each loses at most 3 bytes to the cut
		hm, tm := max-max/2, max/2
		head := all[:hm]
		for !utf8.Valid(head) {
			head = head[:len(head)-1]
		}
		tail := all[len(all)-tm:]
		for !utf8.Valid(tail) {
			tail = tail[1:]
		}
		want := append(append([]byte{}, head...), tail...)
		if !bytes.Equal(kept, want) || om != int64(len(all)-len(want)) {
			t.Fatalf("max=%d: Kept %q omitted %d, want %q %d (all %q)", max, kept, om, want, len(all)-len(want), all)
		}
	}
}
