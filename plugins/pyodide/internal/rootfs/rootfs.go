// Package rootfs is the guest's "/": a read-only virtual directory tree that
// holds the mount points of the real file systems and a few devices.
//
// Without a file system at "/", wasi-libc finds no preopened directory for a
// path outside the mounts and fails with ENOTCAPABLE, which Python reports
// as PermissionError: Path('/x').exists() raised instead of returning False,
// and os.devnull ('/dev/null'), '/dev/urandom' and '/' itself did not exist.
// This tree answers ENOENT for anything it does not hold, EROFS for any
// change, and serves /dev/null, /dev/zero, /dev/random and /dev/urandom.
//
// The real mounts (the workspace, the standard library, the code file) are
// longer prefixes than "/", so wasi-libc sends their paths to them, never here;
// this tree only lists their names so that os.listdir('/') shows them.
package rootfs

import (
	"crypto/rand"
	"io/fs"
	"path"
	"strings"
	"testing/fstest"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

// FS implements experimentalsys.FS. Use New.
type FS struct {
	experimentalsys.UnimplementedFS
	dirs fstest.MapFS       // the directory skeleton, served read-only
	tree experimentalsys.FS // dirs adapted to experimentalsys.FS
}

// device is a character device's behaviour: read fills the buffer (or
// reports end of file when nil), writes are discarded.
type device struct {
	read func([]byte) (int, error)
}

var devices = map[string]device{
	"dev/null":    {},
	"dev/zero":    {read: func(b []byte) (int, error) { clear(b); return len(b), nil }},
	"dev/random":  {read: rand.Read},
	"dev/urandom": {read: rand.Read},
}

// New returns a root holding directories for each of mountPoints (absolute
// guest paths such as "/app") and their parents, plus /dev with its devices.
// Directories are the mount points' names only; their contents are the mounts'.
func New(mountPoints ...string) *FS {
	dirs := fstest.MapFS{
		".":   {Mode: fs.ModeDir | 0o555},
		"dev": {Mode: fs.ModeDir | 0o555},
	}
	for _, mp := range mountPoints {
		p := strings.TrimPrefix(path.Clean("/"+mp), "/")
		for p != "" && p != "." {
			dirs[p] = &fstest.MapFile{Mode: fs.ModeDir | 0o555}
			p = path.Dir(p)
		}
	}
	for name := range devices {
		dirs[name] = &fstest.MapFile{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666}
	}
	return &FS{dirs: dirs, tree: &sysfs.AdaptFS{FS: dirs}}
}

// String names the file system in wazero's diagnostics.
func (*FS) String() string { return "rlm virtual root" }

func clean(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return p[1:]
}

// lookup returns the skeleton's entry for p and whether p ends in a slash
// (which only a directory may).
func (r *FS) lookup(p string) (*fstest.MapFile, experimentalsys.Errno) {
	slash := strings.HasSuffix(p, "/")
	m, ok := r.dirs[clean(p)]
	switch {
	case !ok:
		return nil, experimentalsys.ENOENT
	case slash && !m.Mode.IsDir():
		return nil, experimentalsys.ENOTDIR
	}
	return m, 0
}

// OpenFile implements experimentalsys.FS: devices open for reading and
// writing, directories for reading; anything else is absent or read-only.
func (r *FS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	m, errno := r.lookup(p)
	write := flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0
	switch {
	case errno == experimentalsys.ENOENT && flag&experimentalsys.O_CREAT != 0:
		return nil, experimentalsys.EROFS
	case errno != 0:
		return nil, errno
	case flag&experimentalsys.O_CREAT != 0 && flag&experimentalsys.O_EXCL != 0:
		return nil, experimentalsys.EEXIST
	}
	if d, ok := devices[clean(p)]; ok {
		if flag&experimentalsys.O_DIRECTORY != 0 {
			return nil, experimentalsys.ENOTDIR
		}
		return &devFile{dev: d}, 0
	}
	if m.Mode.IsDir() && write {
		return nil, experimentalsys.EISDIR
	}
	return r.tree.OpenFile(clean(p), flag&^(experimentalsys.O_CREAT|experimentalsys.O_TRUNC), perm)
}

// Stat implements experimentalsys.FS.
func (r *FS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	m, errno := r.lookup(p)
	if errno != 0 {
		return sys.Stat_t{}, errno
	}
	if !m.Mode.IsDir() {
		return devStat, 0
	}
	return r.tree.Stat(clean(p))
}

// Lstat implements experimentalsys.FS: there are no links.
func (r *FS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) { return r.Stat(p) }

// change is the answer to any modification: ENOENT for what does not exist
// (as on a real read-only root), else EROFS.
func (r *FS) change(p string) experimentalsys.Errno {
	if _, errno := r.lookup(p); errno != 0 {
		return errno
	}
	return experimentalsys.EROFS
}

// Mkdir implements experimentalsys.FS.
func (r *FS) Mkdir(p string, _ fs.FileMode) experimentalsys.Errno {
	if _, errno := r.lookup(p); errno == 0 {
		return experimentalsys.EEXIST
	}
	return experimentalsys.EROFS
}

// Chmod implements experimentalsys.FS.
func (r *FS) Chmod(p string, _ fs.FileMode) experimentalsys.Errno { return r.change(p) }

// Rename implements experimentalsys.FS.
func (r *FS) Rename(from, _ string) experimentalsys.Errno { return r.change(from) }

// Rmdir implements experimentalsys.FS.
func (r *FS) Rmdir(p string) experimentalsys.Errno { return r.change(p) }

// Unlink implements experimentalsys.FS.
func (r *FS) Unlink(p string) experimentalsys.Errno { return r.change(p) }

// Link implements experimentalsys.FS.
func (r *FS) Link(from, _ string) experimentalsys.Errno { return r.change(from) }

// Symlink implements experimentalsys.FS.
func (r *FS) Symlink(_, _ string) experimentalsys.Errno { return experimentalsys.EROFS }

// Readlink implements experimentalsys.FS: nothing here is a link.
func (r *FS) Readlink(p string) (string, experimentalsys.Errno) {
	if _, errno := r.lookup(p); errno != 0 {
		return "", errno
	}
	return "", experimentalsys.EINVAL
}

// Utimens implements experimentalsys.FS.
func (r *FS) Utimens(p string, _, _ int64) experimentalsys.Errno { return r.change(p) }

var devStat = sys.Stat_t{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, Nlink: 1}

// devFile is an open device. It is not seekable in any meaningful way; like
// Linux's, a seek succeeds and stays at 0.
type devFile struct {
	experimentalsys.UnimplementedFile
	dev device
}

func (f *devFile) IsDir() (bool, experimentalsys.Errno)      { return false, 0 }
func (f *devFile) Stat() (sys.Stat_t, experimentalsys.Errno) { return devStat, 0 }
func (f *devFile) Close() experimentalsys.Errno              { return 0 }
func (f *devFile) Sync() experimentalsys.Errno               { return 0 }
func (f *devFile) Datasync() experimentalsys.Errno           { return 0 }
func (f *devFile) Truncate(int64) experimentalsys.Errno      { return 0 }

// offset is int64 under another name: go vet's stdmethods check insists that
// a method named Seek(int64, int) returns (int64, error), but
// experimentalsys.File requires an Errno result.
type offset = int64

func (f *devFile) Seek(offset, int) (int64, experimentalsys.Errno) {
	return 0, 0
}

func (f *devFile) Read(b []byte) (int, experimentalsys.Errno) {
	if f.dev.read == nil || len(b) == 0 {
		return 0, 0
	}
	n, err := f.dev.read(b)
	if err != nil {
		return n, experimentalsys.EIO
	}
	return n, 0
}

func (f *devFile) Readdir(int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	return nil, experimentalsys.ENOTDIR
}

func (f *devFile) Pread(b []byte, _ int64) (int, experimentalsys.Errno)  { return f.Read(b) }
func (f *devFile) Write(b []byte) (int, experimentalsys.Errno)           { return len(b), 0 }
func (f *devFile) Pwrite(b []byte, _ int64) (int, experimentalsys.Errno) { return len(b), 0 }
