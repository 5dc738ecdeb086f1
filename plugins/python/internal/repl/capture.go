package repl

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"unicode/utf8"
)

// capture keeps the head and the tail of one stream's output for one cell,
// whatever its size: memory is bounded by the limit, and every byte is
// copied at most twice (once into head or tail), so it is linear in the
// output and constant in space.
type capture struct {
	headCap int
	tailCap int
	head    []byte
	tail    []byte // ring buffer once full; oldest byte at tpos
	tpos    int
	total   int64
}

func newCapture(limit int64) *capture {
	h := int(limit / 2)
	return &capture{headCap: h, tailCap: int(limit) - h}
}

func (c *capture) write(p []byte) {
	c.total += int64(len(p))
	if len(c.head) < c.headCap {
		n := min(c.headCap-len(c.head), len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 || c.tailCap == 0 {
		return
	}
	if len(p) >= c.tailCap {
		if cap(c.tail) < c.tailCap {
			c.tail = make([]byte, c.tailCap)
		}
		c.tail = c.tail[:c.tailCap]
		copy(c.tail, p[len(p)-c.tailCap:])
		c.tpos = 0
		return
	}
	if len(c.tail) < c.tailCap {
		n := min(c.tailCap-len(c.tail), len(p))
		c.tail = append(c.tail, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		n := copy(c.tail[c.tpos:], p)
		p = p[n:]
		c.tpos = (c.tpos + n) % c.tailCap
	}
}

// omissionNotice is inserted where the middle of an over-long stream was cut.
func omissionNotice(n int64) string {
	return fmt.Sprintf("\n... [%d bytes omitted] ...\n", n)
}

// bytes returns the kept output and the number of bytes omitted from the
// middle. The cut points are moved to UTF-8 boundaries so a multi-byte
// character is never split (the few bytes this drops count as omitted).
func (c *capture) bytes() ([]byte, int64) {
	tail := c.tail
	if len(tail) == c.tailCap && c.tpos != 0 {
		tail = make([]byte, 0, len(c.tail))
		tail = append(tail, c.tail[c.tpos:]...)
		tail = append(tail, c.tail[:c.tpos]...)
	}
	kept := int64(len(c.head) + len(tail))
	if c.total <= kept {
		out := make([]byte, 0, kept)
		return append(append(out, c.head...), tail...), 0
	}
	head := c.head
	// drop an incomplete character at the end of head
	for i := 0; i < utf8.UTFMax && i < len(head); i++ {
		b := head[len(head)-1-i]
		if b < 0x80 {
			break
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(head[len(head)-1-i:]) {
				head = head[:len(head)-1-i]
			}
			break
		}
	}
	// drop continuation bytes at the start of tail
	for i := 0; i < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	omitted := c.total - int64(len(head)+len(tail))
	notice := omissionNotice(omitted)
	out := make([]byte, 0, len(head)+len(notice)+len(tail))
	out = append(out, head...)
	out = append(out, notice...)
	out = append(out, tail...)
	return out, omitted
}

// stream reads one of the driver's output pipes (fd 1 or fd 2) for the whole
// life of the driver. Bytes go into the current capture; when the current
// cell's marker is seen, the capture is handed over on done and a new one
// starts. Output produced between cells (background processes) therefore
// lands in the next cell's capture.
//
// The marker scan is incremental: at most len(marker)-1 bytes are held back
// between reads so a marker split across reads is still found, and each byte
// is examined a bounded number of times.
type stream struct {
	f     *os.File
	limit int64

	mu      sync.Mutex
	cur     *capture
	marker  []byte
	pending []byte // held-back bytes that may start a marker
	scratch []byte

	done chan *capture // one per armed marker
	eof  chan struct{} // closed when the pipe reaches EOF or fails
}

func newStream(f *os.File, limit int64) *stream {
	s := &stream{
		f:     f,
		limit: limit,
		cur:   newCapture(limit),
		done:  make(chan *capture, 1),
		eof:   make(chan struct{}),
	}
	go s.loop()
	return s
}

// arm sets the marker that ends the current cell's output.
func (s *stream) arm(marker []byte) {
	s.mu.Lock()
	s.marker = marker
	s.mu.Unlock()
}

// take returns the current capture (with held-back bytes) and starts a new
// one. Used when the marker will never come (crash, kill, startup).
func (s *stream) take() *capture {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	if len(s.pending) > 0 {
		c.write(s.pending)
		s.pending = s.pending[:0]
	}
	s.marker = nil
	s.cur = newCapture(s.limit)
	return c
}

func (s *stream) loop() {
	defer close(s.eof)
	defer s.f.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.f.Read(buf)
		if n > 0 {
			s.feed(buf[:n])
		}
		if err != nil { // EOF, or a read error, ends the stream
			return
		}
	}
}

func (s *stream) feed(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(p) > 0 {
		m := s.marker
		if m == nil {
			s.cur.write(p)
			return
		}
		// data = pending + p, without copying p when nothing is pending
		data, scratch := p, false
		if len(s.pending) > 0 {
			s.scratch = append(append(s.scratch[:0], s.pending...), p...)
			data, scratch = s.scratch, true
			s.pending = s.pending[:0]
		}
		i := bytes.Index(data, m)
		if i < 0 {
			keep := min(len(m)-1, len(data))
			// hold back only a suffix that could begin the marker
			for keep > 0 && !bytes.HasPrefix(m, data[len(data)-keep:]) {
				keep--
			}
			s.cur.write(data[:len(data)-keep])
			s.pending = append(s.pending[:0], data[len(data)-keep:]...)
			return
		}
		s.cur.write(data[:i])
		rest := data[i+len(m):]
		select {
		case s.done <- s.cur: // buffered: one marker per arm
		default: // nobody will collect it (cannot happen with one arm per cell)
		}
		s.cur = newCapture(s.limit)
		s.marker = nil
		if len(rest) == 0 {
			return
		}
		if scratch {
			// rest aliases scratch: copy before the next iteration reuses it
			p = append([]byte(nil), rest...)
		} else {
			p = rest
		}
	}
}
