package isolate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rlmkit/rlm/internal/distinct"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// workspace is the private copy of Spec.Dir that the program works in (see
// the package doc's working directory contract): a size-capped tmpfs
// mounted on the host for LevelProcess with DiskBytes (newWorkspace), or
// the namespace sandbox's own /workspace tmpfs (attachWorkspace).
type workspace struct {
	hostDir string // the caller's Spec.Dir
	base    string // private temp dir holding the host mount point
	mnt     string // the program's working directory, as the host reaches it
	size    int64
	mounted bool // mnt is a tmpfs mounted on the host
	// held is the root of a namespace sandbox's own /workspace tmpfs
	// (attachWorkspace); mnt then names it through /proc/self/fd, which
	// keeps working after the sandbox's mount namespace is gone.
	held *os.File
}

// attachWorkspace copies hostDir into dir, the root of the /workspace tmpfs
// of a namespace sandbox whose program has not started yet, creating every
// entry as owner when owner >= 0, and keeps dir open so that syncBack can
// read the results after the sandbox has died. The workspace owns dir from
// here on, also when it fails.
func attachWorkspace(hostDir string, dir *os.File, size int64, owner int) (*workspace, error) {
	// "/." makes the path walkable: lstat of the bare magic link would not
	// follow it.
	w := &workspace{hostDir: hostDir, mnt: "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/.", size: size, held: dir}
	if err := w.copyIn(owner); err != nil {
		w.remove()
		return nil, err
	}
	return w, nil
}

func (w *workspace) copyIn(owner int) error {
	err := copyTree(w.hostDir, w.mnt, owner)
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("the input files in %s do not fit in the working directory's size cap of %d bytes: raise the disk limit (--max-disk): %w", w.hostDir, w.size, err)
	}
	if err != nil {
		return fmt.Errorf("copy input files into the working directory: %w", err)
	}
	return nil
}

// newWorkspace mounts a tmpfs of size bytes on the host and copies hostDir
// into it; it needs CAP_SYS_ADMIN in the host mount namespace.
func newWorkspace(hostDir string, size int64) (*workspace, error) {
	// The owner's pid in the name lets ReapOwner and the stale sweep find
	// the directory when this process is killed before its cleanup (the
	// directory may be in /tmp, outside any directory the host removes).
	sweepStaleWorkspaces()
	base, err := os.MkdirTemp(sandboxTempDir(false), wsPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("private working directory: %w", err)
	}
	w := &workspace{hostDir: hostDir, base: base, mnt: filepath.Join(base, "w"), size: size}
	if err := os.Mkdir(w.mnt, 0o700); err != nil {
		w.remove()
		return nil, err
	}
	inodes := max(size/1024, 4096)
	opts := "size=" + strconv.FormatInt(size, 10) + ",nr_inodes=" + strconv.FormatInt(inodes, 10) + ",mode=0700"
	detachMounts()
	if err := syscall.Mount("tmpfs", w.mnt, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		w.remove()
		return nil, fmt.Errorf("cannot cap the working directory's total size: mount tmpfs on %s: %w (this needs root, i.e. CAP_SYS_ADMIN in the host mount namespace; run rlm as root, use isolation namespace, or set no disk limit)", w.mnt, err)
	}
	w.mounted = true
	if err := w.copyIn(-1); err != nil {
		w.remove()
		return nil, err
	}
	return w, nil
}

// full reports whether the program filled the tmpfs (bytes or inodes).
func (w *workspace) full() bool {
	if !w.mounted && w.held == nil {
		return false
	}
	var st syscall.Statfs_t
	if syscall.Statfs(w.mnt, &st) != nil {
		return false
	}
	return int64(st.Bavail)*st.Bsize < 64<<10 || st.Ffree == 0
}

// remove unmounts the tmpfs and deletes the temp dir. It is idempotent.
func (w *workspace) remove() error {
	if w == nil {
		return nil
	}
	var errs []error
	if w.held != nil {
		// The last reference to a dead sandbox's tmpfs: closing it frees the
		// memory.
		w.held.Close()
		w.held = nil
	}
	if w.mounted {
		if err := syscall.Unmount(w.mnt, 0); err != nil {
			// Busy only if something still holds it open; detach so it goes
			// away when that ends.
			if err2 := syscall.Unmount(w.mnt, syscall.MNT_DETACH); err2 != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", w.mnt, err2))
			}
		}
		w.mounted = false
	}
	if w.base != "" {
		if err := os.RemoveAll(w.base); err != nil {
			errs = append(errs, err)
		}
		w.base = ""
	}
	return errors.Join(errs...)
}

// sandboxTempDir is where directories the sandbox user must reach are made:
// TMPDIR when other users can traverse down to it, else /tmp. A private
// TMPDIR (a test harness's, one under a 0700 home) would otherwise make every
// namespace run of a root caller fail.
func sandboxTempDir(forOthers bool) string {
	dir := os.TempDir()
	if !forOthers {
		return dir
	}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if p == "/" {
			return dir
		}
	}
}

// reachableBy chmods dir to mode and checks that every ancestor lets other
// users traverse it, so a sandbox running as another uid can reach below it.
func reachableBy(dir string, mode os.FileMode) error {
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("the sandbox user (uid %d) cannot reach %s because %s is not searchable by others: set TMPDIR to a directory like /tmp, or chmod o+x %s", sandboxHostUID, dir, p, p)
		}
		if p == "/" {
			return nil
		}
	}
}

// copyTree copies src into the existing directory dst: directories, regular
// files and symlinks (as links), keeping permission bits and mtimes, and
// giving each entry to owner when owner >= 0. It never follows a symlink.
func copyTree(src, dst string, owner int) error {
	return walkRel(src, func(p, rel string, d fs.DirEntry) error {
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			err = asOwner(owner, func() error { return os.Mkdir(target, info.Mode().Perm()|0o700) })
		case d.Type().IsRegular():
			err = copyFile(p, target, info, owner)
		case d.Type()&fs.ModeSymlink != 0:
			var link string
			if link, err = os.Readlink(p); err == nil {
				err = asOwner(owner, func() error { return os.Symlink(link, target) })
			}
		default:
			return nil // sockets, fifos, devices are not inputs
		}
		return err
	})
}

// asOwner runs create with the calling thread's file-system uid and gid set
// to owner (when owner >= 0), so what it creates belongs to owner from the
// start. A tmpfs that bwrap mounted inside the sandbox's user namespace
// refuses inodes owned by a uid that namespace does not map (EOVERFLOW for
// host root), so chown afterwards is not possible there.
//
// Changing the file-system uid clears the thread's parent-death signal, and
// for the main thread that is the process's: a plugin that did this would
// survive its host's SIGKILL. So the signal is read first and set again
// afterwards, and if the parent died in between (the process was
// re-parented), the signal is delivered now, as the kernel would have.
func asOwner(owner int, create func() error) error {
	if owner < 0 {
		return create()
	}
	runtime.LockOSThread()
	var deathSig int32
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&deathSig)), 0)
	ppid := syscall.Getppid()
	prevGID, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(owner), 0, 0)
	prevUID, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(owner), 0, 0)
	err := create()
	syscall.RawSyscall(syscall.SYS_SETFSUID, prevUID, 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSGID, prevGID, 0, 0)
	if deathSig != 0 {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(deathSig), 0)
		if syscall.Getppid() != ppid {
			_ = syscall.Kill(syscall.Getpid(), syscall.Signal(deathSig))
		}
	}
	// setfsuid reports the previous value, never an error: check by
	// asking again (-1 changes nothing). A thread that could not go back
	// stays locked, so Go discards it when this goroutine ends instead of
	// reusing it with the wrong identity.
	if cur, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0); cur == prevUID {
		if cur, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, ^uintptr(0), 0, 0); cur == prevGID {
			runtime.UnlockOSThread()
		}
	}
	return err
}

func copyFile(src, dst string, info fs.FileInfo, owner int) error {
	err := copyContents(src, func() (out *os.File, err error) {
		err = asOwner(owner, func() (err error) {
			out, err = os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, info.Mode().Perm()|0o600)
			return err
		})
		return out, err
	})
	if err != nil {
		return err
	}
	return os.Chtimes(dst, info.ModTime(), info.ModTime())
}

// copyContents copies the regular file src, never through a symlink, into
// the file create opens (after src, so a missing source creates nothing),
// and closes it. The two directions differ only in how the destination is
// reached: into the sandbox as its owner, back to the host inside an
// os.Root.
func copyContents(src string, create func() (*os.File, error)) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := create()
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// syncBack mirrors the program's working directory into the caller's Dir:
// new and changed regular files are written, directories created, and
// regular files and directories the program removed are removed. Symlinks,
// fifos and devices the program created are not copied back, and every host
// path is reached through os.Root, so a link planted by the program can
// never make syncBack write or delete outside Dir.
func (w *workspace) syncBack() error {
	root, err := os.OpenRoot(w.hostDir)
	if err != nil {
		return err
	}
	defer root.Close()
	// Pass 1: sandbox → host.
	err = walkRel(w.mnt, func(p, rel string, d fs.DirEntry) error {
		info, err := d.Info()
		if err != nil {
			return err
		}
		host, herr := root.Lstat(rel)
		switch {
		case d.IsDir():
			if herr == nil && !host.IsDir() {
				if err := root.RemoveAll(rel); err != nil {
					return err
				}
				herr = fs.ErrNotExist
			}
			if herr != nil {
				return root.Mkdir(rel, info.Mode().Perm()|0o700)
			}
			return nil
		case d.Type().IsRegular():
			if herr == nil && host.Mode().IsRegular() && host.Size() == info.Size() && host.ModTime().Equal(info.ModTime()) && host.Mode().Perm() == info.Mode().Perm() {
				return nil // unchanged
			}
			if herr == nil && !host.Mode().IsRegular() {
				if err := root.RemoveAll(rel); err != nil {
					return err
				}
			}
			return copyIntoRoot(root, p, rel, info)
		default:
			// The program replaced a file or directory by something we do
			// not copy back: the old one is gone, so remove it on the host.
			if herr == nil && (host.Mode().IsRegular() || host.IsDir()) {
				return root.RemoveAll(rel)
			}
			return nil
		}
	})
	if err != nil {
		return fmt.Errorf("copy results back to %s: %w", w.hostDir, err)
	}
	// Pass 2: remove what the program deleted.
	err = walkRel(w.hostDir, func(_, rel string, d fs.DirEntry) error {
		if _, err := os.Lstat(filepath.Join(w.mnt, rel)); errors.Is(err, fs.ErrNotExist) {
			if err := root.RemoveAll(rel); err != nil {
				return err
			}
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove deleted files from %s: %w", w.hostDir, err)
	}
	return nil
}

// walkRel walks dir as filepath.WalkDir does, stopping at the first error,
// and gives fn each entry below dir with its path relative to dir: the
// copy into the sandbox and both passes of syncBack match a tree against
// another by that path.
func walkRel(dir string, fn func(p, rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		return fn(p, rel, d)
	})
}

func copyIntoRoot(root *os.Root, src, rel string, info fs.FileInfo) error {
	err := copyContents(src, func() (*os.File, error) {
		return root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
	})
	if err != nil {
		return err
	}
	if err := root.Chmod(rel, info.Mode().Perm()); err != nil {
		return err
	}
	return root.Chtimes(rel, info.ModTime(), info.ModTime())
}

const wsPrefix = "rlm-isolate-ws-"

var wsSweepOnce sync.Once

// sweepStaleWorkspaces removes the private working directories of runs
// whose process died before its cleanup. It runs once per process.
func sweepStaleWorkspaces() {
	wsSweepOnce.Do(func() {
		reapWorkspaces(deadOwner)
	})
}

func deadOwner(pid int) bool { return pid != os.Getpid() && !proctree.Alive(pid) }

// SweepDead unmounts and removes, in dir, the working directories and
// read-only stages whose owner process is dead: the TMPDIR of a plugin
// whose host was killed, before the host's successor removes it.
func SweepDead(dir string) { reapWorkspaces(deadOwner, dir) }

// HasMountsBelow reports whether anything is mounted at or below dir, which
// must then not be removed recursively.
func HasMountsBelow(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return true // cannot tell: assume the worst
	}
	dir = filepath.Clean(dir)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := strings.ReplaceAll(f[4], `\040`, " ")
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			return true
		}
	}
	return false
}

// reapWorkspaces unmounts and removes the rlm-isolate-ws-PID-* directories
// (and the rlm-isolate-ro-PID-* stages of read-only binds) whose PID match
// accepts, in the places newWorkspace makes them: this
// process's temp dir, /tmp, and extra (another process's $TMPDIR).
func reapWorkspaces(match func(pid int) bool, extra ...string) {
	for _, dir := range distinct.Strings(append([]string{os.TempDir(), "/tmp"}, extra...), filepath.Clean) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			// Names without the pid (an older rlm's) are left alone: their
			// owner cannot be told.
			rest, ws := strings.CutPrefix(e.Name(), wsPrefix)
			if !ws {
				var ro bool
				if rest, ro = strings.CutPrefix(e.Name(), roPrefix); !ro {
					continue
				}
			}
			pidText, _, hasPid := strings.Cut(rest, "-")
			pid, err := strconv.Atoi(pidText)
			if !hasPid || err != nil || !e.IsDir() || !match(pid) {
				continue
			}
			base := filepath.Join(dir, e.Name())
			if !ws {
				unmountStage(base) // read-only binds of host files: never RemoveAll
				continue
			}
			_ = syscall.Unmount(filepath.Join(base, "w"), syscall.MNT_DETACH)
			_ = os.RemoveAll(base)
		}
	}
}
