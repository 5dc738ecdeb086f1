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
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
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

// OpenFile implements experimentalsys.FS.
func (f *FS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	slash := dirSlash(p)
	p = clean(p)
	fl := toOpenFlags(flag)
	if slash {
		if flag&experimentalsys.O_CREAT != 0 {
			// Linux: open("x/", O_CREAT) is EISDIR whether or not x exists,
			// unless x exists and is not a directory (ENOTDIR).
			if errno := f.mustBeDir(p); errno == experimentalsys.ENOTDIR {
				return nil, errno
			} else if errno != 0 && errno != experimentalsys.ENOENT {
				return nil, errno
			}
			return nil, experimentalsys.EISDIR
		}
		fl |= unix.O_DIRECTORY // the kernel then answers ENOTDIR or EISDIR
	}
	fd, err := f.openat2(p, fl, uint32(perm.Perm()))
	if err != nil {
		if err == unix.EISDIR || err == unix.ENXIO {
			return nil, experimentalsys.UnwrapOSError(err)
		}
		return nil, f.errno("open", p, err)
	}
	return newFile(os.NewFile(uintptr(fd), p), flag), 0
}

// Lstat implements experimentalsys.FS. The last element may be a link: its
// own metadata is returned, as lstat does.
func (f *FS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	if dirSlash(p) {
		// A trailing slash makes lstat follow a final link, which this FS
		// refuses; Stat does exactly that and checks the type.
		return f.Stat(p)
	}
	p = clean(p)
	if p == "." {
		return f.Stat(p)
	}
	dfd, base, err := f.parent(p)
	if err != nil {
		return sys.Stat_t{}, f.errno("lstat", p, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return sys.Stat_t{}, f.errno("lstat", p, err)
	}
	return toStat(&st), 0
}

// Stat implements experimentalsys.FS. A path that is or goes through a link is
// refused rather than followed.
func (f *FS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	fl := unix.O_PATH
	if dirSlash(p) {
		fl |= unix.O_DIRECTORY
	}
	p = clean(p)
	fd, err := f.openat2(p, fl, 0)
	if err != nil {
		return sys.Stat_t{}, f.errno("stat", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return sys.Stat_t{}, f.errno("stat", p, err)
	}
	return toStat(&st), 0
}

// Mkdir implements experimentalsys.FS.
func (f *FS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	p = clean(p)
	dfd, base, err := f.parent(p)
	if err != nil {
		if err == unix.ENOTDIR {
			return experimentalsys.ENOENT
		}
		return f.errno("mkdir", p, err)
	}
	defer unix.Close(dfd)
	err = unix.Mkdirat(dfd, base, uint32(perm.Perm()))
	if err == unix.ENOTDIR {
		return experimentalsys.ENOENT
	}
	return f.errno("mkdir", p, err)
}

// Chmod implements experimentalsys.FS. The file is opened beneath the root
// without following links and changed through its descriptor.
func (f *FS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if dirSlash(p) {
		if errno := f.mustBeDir(p); errno != 0 {
			return errno
		}
	}
	p = clean(p)
	fd, err := f.openat2(p, unix.O_PATH, 0)
	if err != nil {
		return f.errno("chmod", p, err)
	}
	defer unix.Close(fd)
	// fchmod does not accept O_PATH descriptors; the /proc magic link to an
	// already-resolved descriptor is the standard way to reach the inode.
	return f.errno("chmod", p, unix.Chmod("/proc/self/fd/"+itoa(fd), uint32(perm.Perm())))
}

// Rename implements experimentalsys.FS. A link may be renamed; it is not followed.
func (f *FS) Rename(from, to string) experimentalsys.Errno {
	if dirSlash(from) || dirSlash(to) {
		// A trailing slash on either name means the source must be a
		// directory (the target, if any, then must be one too: renameat says so).
		if st, errno := f.Lstat(clean(from)); errno != 0 {
			return errno
		} else if !st.Mode.IsDir() {
			return experimentalsys.ENOTDIR
		}
	}
	from, to = clean(from), clean(to)
	ffd, fbase, err := f.parent(from)
	if err != nil {
		return f.errno("rename", from, err)
	}
	defer unix.Close(ffd)
	tfd, tbase, err := f.parent(to)
	if err != nil {
		return f.errno("rename", to, err)
	}
	defer unix.Close(tfd)
	if fbase == "." || tbase == "." {
		return experimentalsys.EINVAL
	}
	return f.errno("rename", from, unix.Renameat(ffd, fbase, tfd, tbase))
}

// Rmdir implements experimentalsys.FS.
func (f *FS) Rmdir(p string) experimentalsys.Errno {
	p = clean(p)
	if p == "." {
		return experimentalsys.EINVAL
	}
	dfd, base, err := f.parent(p)
	if err != nil {
		return f.errno("rmdir", p, err)
	}
	defer unix.Close(dfd)
	return f.errno("rmdir", p, unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR))
}

// Unlink implements experimentalsys.FS. Removing a link removes the link only.
func (f *FS) Unlink(p string) experimentalsys.Errno {
	if dirSlash(p) {
		// unlink("x/"): EISDIR for a directory, ENOTDIR for anything else.
		if errno := f.mustBeDir(p); errno != 0 {
			return errno
		}
		return experimentalsys.EISDIR
	}
	p = clean(p)
	dfd, base, err := f.parent(p)
	if err != nil {
		return f.errno("unlink", p, err)
	}
	defer unix.Close(dfd)
	err = unix.Unlinkat(dfd, base, 0)
	if err == unix.EISDIR {
		return experimentalsys.EISDIR
	}
	return f.errno("unlink", p, err)
}

// Link implements experimentalsys.FS: always refused. A hard link would let
// the guest alias a file across the workspace boundary or keep a file alive
// that the host deletes.
func (f *FS) Link(oldPath, newPath string) experimentalsys.Errno {
	f.denied("link", clean(newPath), "hard links are not allowed")
	return experimentalsys.EPERM
}

// Symlink implements experimentalsys.FS: always refused (wazero issue #2321).
func (f *FS) Symlink(oldPath, linkName string) experimentalsys.Errno {
	f.denied("symlink", clean(linkName), "symbolic links are not allowed (target "+oldPath+")")
	return experimentalsys.EPERM
}

// Readlink implements experimentalsys.FS. It returns the link's text, which is
// harmless: following it is what is refused.
func (f *FS) Readlink(p string) (string, experimentalsys.Errno) {
	if dirSlash(p) {
		// "l/" names what the link points to, which is never followed here.
		if errno := f.mustBeDir(p); errno != 0 {
			return "", errno
		}
		return "", experimentalsys.EINVAL
	}
	p = clean(p)
	dfd, base, err := f.parent(p)
	if err != nil {
		return "", f.errno("readlink", p, err)
	}
	defer unix.Close(dfd)
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dfd, base, buf)
	if err != nil {
		return "", f.errno("readlink", p, err)
	}
	return string(buf[:n]), 0
}

// Utimens implements experimentalsys.FS without following a final link.
func (f *FS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if dirSlash(p) {
		if errno := f.mustBeDir(p); errno != 0 {
			return errno
		}
	}
	p = clean(p)
	dfd, base, err := f.parent(p)
	if err != nil {
		return f.errno("utimens", p, err)
	}
	defer unix.Close(dfd)
	if base == "." {
		base = ""
	}
	ts := timespecs(atim, mtim)
	flags := unix.AT_SYMLINK_NOFOLLOW
	if base == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	return f.errno("utimens", p, unix.UtimesNanoAt(dfd, base, ts, flags))
}

func timespecs(atim, mtim int64) []unix.Timespec {
	conv := func(t int64) unix.Timespec {
		if t == experimentalsys.UTIME_OMIT {
			return unix.Timespec{Nsec: unix.UTIME_OMIT}
		}
		return unix.NsecToTimespec(t)
	}
	return []unix.Timespec{conv(atim), conv(mtim)}
}

func toStat(st *unix.Stat_t) sys.Stat_t {
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return sys.Stat_t{
		Dev:   st.Dev,
		Ino:   st.Ino,
		Mode:  mode,
		Nlink: st.Nlink,
		Size:  st.Size,
		Atim:  st.Atim.Nano(),
		Mtim:  st.Mtim.Nano(),
		Ctim:  st.Ctim.Nano(),
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

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
