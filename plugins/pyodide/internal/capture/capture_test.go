package capture

import (
	"bytes"
	"math/rand"
	"testing"
)

// reference computes what Buffer must keep for the concatenated input.
func reference(all []byte, max int) []byte {
	if max <= 0 || len(all) <= max {
		return all
	}
	h := max / 2
	t := max - h
	return append(append([]byte{}, all[:h]...), all[len(all)-t:]...)
}

func TestBufferMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, max := range []int{0, 1, 2, 7, 100, 1000} {
		for trial := 0; trial < 50; trial++ {
			b := NewBuffer(max)
			var all []byte
			for i := rng.Intn(20); i >= 0; i-- {
				p := make([]byte, rng.Intn(300))
				rng.Read(p)
				all = append(all, p...)
				if n, err := b.Write(p); n != len(p) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			want := reference(all, max)
			if got := b.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("max=%d len=%d: kept %d bytes, want %d (contents differ)", max, len(all), len(got), len(want))
			}
			if b.Total() != int64(len(all)) {
				t.Fatalf("Total = %d, want %d", b.Total(), len(all))
			}
			if got := b.Omitted(); got != int64(len(all)-len(want)) {
				t.Fatalf("Omitted = %d, want %d", got, len(all)-len(want))
			}
			if b.Truncated() != (len(all) > len(want)) {
				t.Fatalf("Truncated = %v with %d of %d kept", b.Truncated(), len(want), len(all))
			}
		}
	}
}

func TestBufferKeepsHeadAndTail(t *testing.T) {
	b := NewBuffer(10)
	b.Write([]byte("HEAD-"))
	for i := 0; i < 1000; i++ {
		b.Write([]byte("xxxxxxxxxx"))
	}
	b.Write([]byte("-TAIL"))
	if got := string(b.Bytes()); got != "HEAD--TAIL" {
		t.Fatalf("kept %q", got)
	}
	if b.Omitted() != 10000 {
		t.Fatalf("omitted %d", b.Omitted())
	}
}
