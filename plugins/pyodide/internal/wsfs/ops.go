//go:build linux

package wsfs

import (
	"io/fs"
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

// The experimentalsys.FS operations: each resolves its path beneath the
// root (openat2) and acts on it with an *at(2) call.

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
