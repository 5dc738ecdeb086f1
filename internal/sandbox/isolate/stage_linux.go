package isolate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// sandboxHostUID is the host uid (and gid) a namespace sandbox runs as when
// rlm runs as root. bwrap started by root without setuid maps the sandbox's
// uid to the caller's, i.e. to host uid 0: no capabilities, but still root
// for every check that compares uids (sysctl files in /proc/sys, root-only
// /proc files, SO_PEERCRED, RLIMIT_NPROC). Measured on this project's CI
// host: such a sandbox rewrote the host's kernel.core_pattern. So a root
// caller starts bwrap as nobody instead; the sandbox then is nobody on the
// host too.
const sandboxHostUID = 65534

// stage makes read-only paths reachable by the sandbox's unprivileged uid.
// A runtime prefix under /root (pyenv) sits below a 0700 directory that uid
// 65534 cannot traverse, so bwrap could not bind it. stage bind-mounts each
// path read-only under a traversable private directory; bwrap binds from
// there. Needs root, which is the only case where it is used.
type stage struct {
	base    string
	sources map[string]string // requested path -> path bwrap binds from
	mounts  []string
}

func newStage(all []string) (*stage, error) {
	st := &stage{sources: map[string]string{}}
	var paths []string
	for _, p := range all {
		if !othersCanReach(p) {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return st, nil // nothing to mount: a runtime under /usr, /opt, ...
	}
	// The owner's pid is in the name, so ReapOwner and the next process's
	// sweep can unmount what a killed owner left (see reapWorkspaces).
	sweepStaleWorkspaces()
	base, err := os.MkdirTemp(sandboxTempDir(true), roPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	st.base = base
	if err := reachableBy(base, 0o711); err != nil {
		st.remove()
		return nil, err
	}
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			st.remove()
			return nil, fmt.Errorf("read-only path: %w", err)
		}
		target := filepath.Join(base, strconv.Itoa(i))
		if fi.IsDir() {
			err = os.Mkdir(target, 0o755)
		} else {
			err = os.WriteFile(target, nil, 0o644)
		}
		if err != nil {
			st.remove()
			return nil, err
		}
		detachMounts()
		if err := syscall.Mount(p, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			st.remove()
			return nil, fmt.Errorf("expose %s to the sandbox user: bind mount: %w", p, err)
		}
		st.mounts = append(st.mounts, target)
		if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
			st.remove()
			return nil, fmt.Errorf("expose %s to the sandbox user: remount read-only: %w", p, err)
		}
		st.sources[p] = target
	}
	return st, nil
}

const roPrefix = "rlm-isolate-ro-"

// othersCanReach reports whether a user with no relation to the files' owner
// can reach p: search permission on every directory above it, and on p too
// when it is a directory.
func othersCanReach(p string) bool {
	fi, err := os.Stat(p)
	if err != nil {
		return false
	}
	if fi.IsDir() && fi.Mode().Perm()&0o005 != 0o005 {
		return false
	}
	if !fi.IsDir() && fi.Mode().Perm()&0o004 == 0 {
		return false
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// unmountStage detaches the binds of a stage directory whose owner is gone
// and removes it, one empty entry at a time: a bind that will not unmount
// stays, so nothing below it (the runtime's own files) is ever deleted.
func unmountStage(base string) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		p := filepath.Join(base, e.Name())
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
		_ = os.Remove(p)
	}
	_ = os.Remove(base)
}

func (st *stage) source(p string) string {
	if s, ok := st.sources[p]; ok {
		return s
	}
	return p
}

func (st *stage) remove() error {
	if st == nil {
		return nil
	}
	var errs []error
	for i := len(st.mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(st.mounts[i], syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", st.mounts[i], err))
		}
	}
	st.mounts = nil
	// Never RemoveAll over a bind that is still mounted: that would delete the
	// runtime's own files.
	if st.base != "" && len(errs) == 0 {
		if err := os.RemoveAll(st.base); err != nil {
			errs = append(errs, err)
		}
		st.base = ""
	}
	return errors.Join(errs...)
}
