package repl

import (
	"bytes"
	"os"
	"sync"

	"github.com/rlmkit/rlm/internal/sandbox/capbuf"
)

// stream reads one of the driver's output pipes (fd 1 or fd 2) for the whole
// life of the driver. Bytes go into the current capture (a capbuf.Buffer:
// head and tail within the cell's output cap); when the current cell's
// marker is seen, the capture is handed over on done and a new one starts. Output produced between cells (background processes) therefore
// lands in the next cell's capture.
//
// The marker scan is incremental: at most len(marker)-1 bytes are held back
// between reads so a marker split across reads is still found, and each byte
// is examined a bounded number of times.
type stream struct {
	f     *os.File
	limit int64

	mu      sync.Mutex
	cur     *capbuf.Buffer
	marker  []byte
	pending []byte // held-back bytes that may start a marker
	scratch []byte

	done chan *capbuf.Buffer // one per armed marker
	eof  chan struct{}       // closed when the pipe reaches EOF or fails
}

func newStream(f *os.File, limit int64) *stream {
	s := &stream{
		f:     f,
		limit: limit,
		cur:   capbuf.New(limit),
		done:  make(chan *capbuf.Buffer, 1),
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
func (s *stream) take() *capbuf.Buffer {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	if len(s.pending) > 0 {
		c.Write(s.pending)
		s.pending = s.pending[:0]
	}
	s.marker = nil
	s.cur = capbuf.New(s.limit)
	return c
}

func (s *stream) loop() {
	defer close(s.eof)
	defer s.f.Close()
	buf := make([]byte, 256<<10)
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
			s.cur.Write(p)
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
			s.cur.Write(data[:len(data)-keep])
			s.pending = append(s.pending[:0], data[len(data)-keep:]...)
			return
		}
		s.cur.Write(data[:i])
		rest := data[i+len(m):]
		select {
		case s.done <- s.cur: // buffered: one marker per arm
		default: // nobody will collect it (cannot happen with one arm per cell)
		}
		s.cur = capbuf.New(s.limit)
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
