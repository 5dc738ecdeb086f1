// Package capbuf keeps the head and tail of an output stream within a fixed
// budget, so a program that prints gigabytes costs rlm a constant amount of
// memory and the reader still sees how the output began and ended.
package capbuf

import (
	"fmt"
	"math"
	"sync"
	"unicode/utf8"

	"github.com/rlmkit/rlm/core/defaults"
)

// DefaultMax is the per-stream budget when the caller sets none.
const DefaultMax = defaults.MaxOutputBytes

// Buffer is an io.Writer that keeps at most Max bytes: the first half of the
// budget as written, the second half as a ring of the latest bytes. Writing
// is O(len(p)) whatever has been written before. Safe for concurrent use.
type Buffer struct {
	mu    sync.Mutex
	max   int
	head  []byte
	tail  []byte // ring buffer of cap tailMax once full
	pos   int    // next write position in the ring
	full  bool   // ring has wrapped
	total int64
}

// New returns a buffer keeping at most max bytes: DefaultMax when max is 0,
// everything when it is negative (the caller bounds the stream otherwise).
func New(max int64) *Buffer {
	switch {
	case max == 0:
		max = DefaultMax
	case max < 0 || max > math.MaxInt/2:
		max = math.MaxInt / 2
	}
	return &Buffer{max: int(max)}
}

func (b *Buffer) headMax() int { return b.max - b.max/2 }
func (b *Buffer) tailMax() int { return b.max / 2 }

// Write never fails and never blocks on the budget.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.headMax() - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	tm := b.tailMax()
	if len(p) == 0 || tm == 0 {
		return n, nil
	}
	if len(p) >= tm {
		// Only the last tm bytes can survive; start the ring afresh.
		if cap(b.tail) < tm {
			b.tail = make([]byte, tm)
		}
		b.tail = b.tail[:tm]
		copy(b.tail, p[len(p)-tm:])
		b.pos, b.full = 0, true
		return n, nil
	}
	if !b.full {
		if len(b.tail)+len(p) <= tm {
			b.tail = append(b.tail, p...)
			if len(b.tail) == tm {
				b.pos, b.full = 0, true
			}
			return n, nil
		}
		// Grow to the full ring, then fall through to the wrap-around copy.
		k := tm - len(b.tail)
		b.tail = append(b.tail, p[:k]...)
		p = p[k:]
		b.pos, b.full = 0, true
	}
	for len(p) > 0 {
		k := copy(b.tail[b.pos:], p)
		p = p[k:]
		b.pos = (b.pos + k) % tm
	}
	return n, nil
}

// Total is how many bytes were written, kept or not.
func (b *Buffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Omitted is how many bytes were dropped from the middle, including the
// pieces of a multi-byte character cut off at either side of the gap.
func (b *Buffer) Omitted() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, _, om := b.parts()
	return om
}

// parts returns the head and the tail (in order) as kept and the number of
// bytes dropped between them. When something was dropped, the cuts are
// moved to UTF-8 boundaries: a character split by the gap is dropped whole
// (at most 3 bytes a side, counted as omitted), so the output stays valid
// UTF-8 when the stream was.
func (b *Buffer) parts() (head, tail []byte, omitted int64) {
	head, tail = b.head, b.tail
	if b.full && b.pos > 0 {
		tail = make([]byte, 0, len(b.tail))
		tail = append(append(tail, b.tail[b.pos:]...), b.tail[:b.pos]...)
	}
	if b.total == int64(len(head)+len(tail)) {
		return head, tail, 0
	}
	head = head[:len(head)-partialRune(head)]
	for i := 0; i < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	return head, tail, b.total - int64(len(head)+len(tail))
}

// partialRune is the length of an incomplete character at the end of p:
// a start byte of a multi-byte character missing its last bytes.
func partialRune(p []byte) int {
	for i := 1; i < utf8.UTFMax && i <= len(p); i++ {
		c := p[len(p)-i]
		if c < utf8.RuneSelf {
			return 0
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(p[len(p)-i:]) {
				return 0
			}
			return i
		}
	}
	return 0
}

// Notice is the line put where the middle of the output was cut.
func Notice(omitted int64) string {
	return fmt.Sprintf("\n... [%d bytes omitted] ...\n", omitted)
}

// Bytes returns the kept output; when something was dropped, head and tail
// are joined by Notice.
func (b *Buffer) Bytes() []byte { return b.bytes(true) }

// Kept returns head and tail with nothing between them, so the result is
// never longer than the budget (the WebAssembly backend's contract); the
// caller reports Omitted itself.
func (b *Buffer) Kept() []byte { return b.bytes(false) }

func (b *Buffer) bytes(notice bool) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	head, tail, om := b.parts()
	out := make([]byte, 0, len(head)+len(tail)+40)
	out = append(out, head...)
	if om > 0 && notice {
		out = append(out, Notice(om)...)
	}
	return append(out, tail...)
}
