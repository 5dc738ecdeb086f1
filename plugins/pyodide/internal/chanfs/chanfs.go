// Package chanfs is the private message channel between the host and the
// REPL driver running in the guest: a file system with a single file, "chan",
// that can be opened once. The driver opens it before any user code runs, so
// user code cannot open a second handle, and nothing the user prints (to
// stdout, stderr, or fd 1 and 2 directly) can reach or forge the protocol.
//
// Reads block until the host sends a message (or the channel is closed, which
// the guest sees as end of file); writes are split into lines and delivered
// to the host one message per line.
package chanfs

import (
	"bytes"
	"io/fs"
	"sync"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// Chan is both the FS to mount and the host's end of the channel.
type Chan struct {
	experimentalsys.UnimplementedFS

	in     chan []byte   // host -> guest
	out    chan []byte   // guest -> host, one line each
	closed chan struct{} // closed by Close
	once   sync.Once

	mu     sync.Mutex
	opened bool
}

// New returns an open channel.
func New() *Chan {
	return &Chan{in: make(chan []byte, 16), out: make(chan []byte, 16), closed: make(chan struct{})}
}

// Send queues one message (a line is appended) for the guest. It returns
// false when the channel is closed.
func (c *Chan) Send(msg []byte) bool {
	b := make([]byte, 0, len(msg)+1)
	b = append(append(b, msg...), '\n')
	select { // a select with both ready picks at random: check closed first
	case <-c.closed:
		return false
	default:
	}
	select {
	case c.in <- b:
		return true
	case <-c.closed:
		return false
	}
}

// Out delivers the guest's messages, one line each without the newline.
func (c *Chan) Out() <-chan []byte { return c.out }

// Close makes the guest's pending and future reads return end of file.
func (c *Chan) Close() { c.once.Do(func() { close(c.closed) }) }

// Closed is closed when Close was called.
func (c *Chan) Closed() <-chan struct{} { return c.closed }

// OpenFile implements experimentalsys.FS: "chan" opens once; "." is the directory.
func (c *Chan) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	switch path {
	case "", ".", "/":
		return &dirFile{}, 0
	case "chan", "/chan":
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.opened {
			return nil, experimentalsys.EACCES
		}
		c.opened = true
		return &chanFile{c: c}, 0
	}
	if flag&experimentalsys.O_CREAT != 0 {
		return nil, experimentalsys.EACCES
	}
	return nil, experimentalsys.ENOENT
}

// Stat implements experimentalsys.FS.
func (c *Chan) Stat(path string) (sys.Stat_t, experimentalsys.Errno) {
	switch path {
	case "", ".", "/":
		return sys.Stat_t{Mode: fs.ModeDir | 0o500, Nlink: 1}, 0
	case "chan", "/chan":
		return chanStat, 0
	}
	return sys.Stat_t{}, experimentalsys.ENOENT
}

// Lstat implements experimentalsys.FS.
func (c *Chan) Lstat(path string) (sys.Stat_t, experimentalsys.Errno) { return c.Stat(path) }

var chanStat = sys.Stat_t{Mode: fs.ModeCharDevice | fs.ModeDevice | 0o600, Nlink: 1, Ino: 1}

type dirFile struct {
	experimentalsys.UnimplementedFile
}

func (*dirFile) IsDir() (bool, experimentalsys.Errno) { return true, 0 }

func (*dirFile) Stat() (sys.Stat_t, experimentalsys.Errno) {
	return sys.Stat_t{Mode: fs.ModeDir | 0o500, Nlink: 1}, 0
}
func (*dirFile) Readdir(int) ([]experimentalsys.Dirent, experimentalsys.Errno) { return nil, 0 }
func (*dirFile) Close() experimentalsys.Errno                                  { return 0 }

type chanFile struct {
	experimentalsys.UnimplementedFile
	c       *Chan
	pending []byte // unread part of the current inbound message
	partial []byte // outbound bytes not yet terminated by a newline
}

func (f *chanFile) IsDir() (bool, experimentalsys.Errno)      { return false, 0 }
func (f *chanFile) Stat() (sys.Stat_t, experimentalsys.Errno) { return chanStat, 0 }

func (f *chanFile) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	if len(f.pending) == 0 {
		select {
		case m := <-f.c.in:
			f.pending = m
		case <-f.c.closed:
			return 0, 0 // end of file
		}
	}
	n := copy(buf, f.pending)
	f.pending = f.pending[n:]
	return n, 0
}

func (f *chanFile) Write(buf []byte) (int, experimentalsys.Errno) {
	n := len(buf)
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			f.partial = append(f.partial, buf...)
			break
		}
		line := append(f.partial, buf[:i]...)
		f.partial = nil
		buf = buf[i+1:]
		select {
		case f.c.out <- line:
		case <-f.c.closed:
			return n, experimentalsys.EIO
		case <-time.After(time.Minute):
			// The host stopped listening without closing: do not hang the guest forever.
			return n, experimentalsys.EIO
		}
	}
	return n, 0
}

func (f *chanFile) Close() experimentalsys.Errno { return 0 }
