// Package capture holds a bounded copy of a stream: the first and the last
// bytes written, and a count of what was dropped in between.
//
// Keeping both ends matters for programs that fail after a lot of output: the
// head shows what the program set out to do, the tail holds the traceback.
// Each Write costs O(len(p)); nothing already kept is rescanned or moved
// except inside the fixed-size tail ring.
package capture

import "sync"

// Buffer is an io.Writer that keeps at most Max bytes: the first Max/2 and the
// last Max-Max/2. Max <= 0 keeps everything. It is safe for concurrent use.
type Buffer struct {
	Max int

	mu    sync.Mutex
	head  []byte
	ring  []byte // tail ring buffer, len == tail cap once full
	rpos  int    // next write position in ring when full
	full  bool
	total int64
}

// NewBuffer returns a Buffer keeping at most max bytes.
func NewBuffer(max int) *Buffer { return &Buffer{Max: max} }

// Write implements io.Writer. It never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if b.Max <= 0 {
		b.head = append(b.head, p...)
		return n, nil
	}
	headMax := b.Max / 2
	tailMax := b.Max - headMax
	if room := headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || tailMax == 0 {
		return n, nil
	}
	if len(p) >= tailMax {
		b.ring = append(b.ring[:0], p[len(p)-tailMax:]...)
		b.rpos, b.full = 0, true
		return n, nil
	}
	for len(p) > 0 {
		if !b.full {
			k := min(tailMax-len(b.ring), len(p))
			b.ring = append(b.ring, p[:k]...)
			p = p[k:]
			if len(b.ring) == tailMax {
				b.full, b.rpos = true, 0
			}
			continue
		}
		k := copy(b.ring[b.rpos:], p)
		p = p[k:]
		b.rpos = (b.rpos + k) % tailMax
	}
	return n, nil
}

// Bytes returns the kept bytes: head then tail, at most Max.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]byte, 0, len(b.head)+len(b.ring))
	out = append(out, b.head...)
	if b.full {
		out = append(out, b.ring[b.rpos:]...)
		out = append(out, b.ring[:b.rpos]...)
	} else {
		out = append(out, b.ring...)
	}
	return out
}

// Total is the number of bytes written.
func (b *Buffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Omitted is the number of bytes written but not kept.
func (b *Buffer) Omitted() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - int64(len(b.head)+len(b.ring))
}

// Truncated reports whether any byte was dropped.
func (b *Buffer) Truncated() bool { return b.Omitted() > 0 }
