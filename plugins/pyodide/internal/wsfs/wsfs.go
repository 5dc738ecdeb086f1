//go:build linux

// Package wsfs is the workspace file system the WebAssembly guest sees at
// /app: a host directory that the guest cannot leave.
//
// wazero's WithDirMount resolves guest paths with ordinary host calls, so a
// symbolic link inside the directory (planted by the guest with os.symlink or
// already present) leads anywhere on the host (wazero issue #2321). This FS
// instead resolves every path with openat2(2) relative to a directory file
// descriptor, with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS:
// the kernel refuses any path that would leave the directory or pass through
// a symbolic link, atomically, so there is no check-then-use race. Names
// are then operated on with the *at(2) calls against a parent directory
// descriptor that was itself opened that way.
//
// The guest may not create symbolic links or hard links (both could point
// outside or alias files), and may not follow links it finds. It may list,
// lstat, readlink, rename and unlink them, which reveals nothing beyond the
// link's own text. Every refusal is reported to the Denied callback so the
// host can log a security event.
//
// openat2 needs Linux 5.6. New reports an error on older kernels rather than
// fall back to something weaker.
package wsfs

import (
	"errors"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// FS implements experimentalsys.FS over one host directory. Use New.
type FS struct {
	experimentalsys.UnimplementedFS
	dir    string
	root   *os.File
	denied func(op, path, reason string)
	mu     sync.Mutex
	closed bool
}

const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// New opens dir as a workspace. denied, if not nil, is called (from the guest's
// goroutine) each time the guest is refused an operation for safety reasons:
// a path that leaves the workspace or goes through a symbolic link, or an
// attempt to create a link.
func New(dir string, denied func(op, path, reason string)) (*FS, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open workspace", Path: dir, Err: err}
	}
	// Probe openat2 once so an old kernel is a clear error, not EPERM later.
	probe, err := unix.Openat2(fd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ENOSYS) {
			return nil, errors.New("wsfs: the kernel lacks openat2 (Linux >= 5.6 is required to mount a workspace safely)")
		}
		return nil, &os.PathError{Op: "openat2", Path: dir, Err: err}
	}
	unix.Close(probe)
	if denied == nil {
		denied = func(string, string, string) {}
	}
	return &FS{dir: dir, root: os.NewFile(uintptr(fd), dir), denied: denied}, nil
}

// Close releases the directory descriptor. Files already opened stay valid.
func (f *FS) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	return f.root.Close()
}

// String returns the host directory, for wazero's diagnostics.
func (f *FS) String() string { return f.dir }

// clean turns a guest path, relative to the mount, into a relative host path.
// It drops a trailing slash; callers that must honour one (only a directory
// may be named with it) check dirSlash first.
func clean(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

// dirSlash reports whether p ends in a slash that is not the whole path: POSIX
// then requires it to name a directory ("file.txt/" is ENOTDIR, and creating
// "new/" with open is EISDIR), which path.Clean would silently forget.
func dirSlash(p string) bool {
	return strings.HasSuffix(p, "/") && clean(p) != "."
}

// mustBeDir is the check a trailing slash demands of an existing path: 0 for
// a directory, ENOTDIR for anything else, or the error of looking it up.
func (f *FS) mustBeDir(p string) experimentalsys.Errno {
	st, errno := f.Stat(p)
	if errno != 0 {
		return errno
	}
	if !st.Mode.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return 0
}

// errno converts an error, reporting refusals. ELOOP (a symbolic link on the
// way) and EXDEV (the path would leave the directory) become EPERM, which the
// guest sees as "Operation not permitted".
func (f *FS) errno(op, p string, err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		switch e {
		case unix.ELOOP:
			f.denied(op, p, "path goes through a symbolic link")
			return experimentalsys.EPERM
		case unix.EXDEV:
			f.denied(op, p, "path leaves the workspace")
			return experimentalsys.EPERM
		}
	}
	return experimentalsys.UnwrapOSError(err)
}

// openat2 opens p beneath the root without following any symbolic link.
func (f *FS) openat2(p string, flags int, mode uint32) (int, error) {
	if flags&unix.O_CREAT == 0 {
		mode = 0 // openat2, unlike openat, rejects a mode without O_CREAT
	}
	for {
		fd, err := unix.Openat2(int(f.root.Fd()), p, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC),
			Mode:    uint64(mode),
			Resolve: resolve,
		})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		return fd, err
	}
}

// parent opens the directory containing p and returns it with p's base name.
// The root itself has no parent inside the workspace: its base is ".".
func (f *FS) parent(p string) (int, string, error) {
	dir, base := path.Split(p)
	if dir == "" {
		dir = "."
	}
	fd, err := f.openat2(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	return fd, base, err
}

func toOpenFlags(oflag experimentalsys.Oflag) int {
	var fl int
	switch oflag & (experimentalsys.O_RDONLY | experimentalsys.O_RDWR | experimentalsys.O_WRONLY) {
	case experimentalsys.O_RDWR:
		fl = unix.O_RDWR
	case experimentalsys.O_WRONLY:
		fl = unix.O_WRONLY
	default:
		fl = unix.O_RDONLY
	}
	for _, m := range []struct {
		o experimentalsys.Oflag
		u int
	}{
		{experimentalsys.O_APPEND, unix.O_APPEND},
		{experimentalsys.O_CREAT, unix.O_CREAT},
		{experimentalsys.O_DIRECTORY, unix.O_DIRECTORY},
		{experimentalsys.O_DSYNC, unix.O_DSYNC},
		{experimentalsys.O_EXCL, unix.O_EXCL},
		{experimentalsys.O_NOFOLLOW, unix.O_NOFOLLOW},
		{experimentalsys.O_NONBLOCK, unix.O_NONBLOCK},
		{experimentalsys.O_RSYNC, unix.O_RSYNC},
		{experimentalsys.O_SYNC, unix.O_SYNC},
		{experimentalsys.O_TRUNC, unix.O_TRUNC},
	} {
		if oflag&m.o != 0 {
			fl |= m.u
		}
	}
	return fl | unix.O_LARGEFILE
}
