package isolate

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Host /etc entries a runtime needs: the dynamic linker's cache and config,
// Debian's alternatives links (/usr/bin/awk -> /etc/alternatives/awk) and the
// time zone. Everything else in /etc stays hidden.
var etcAlways = []string{"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime"}

// With the network allowed, name resolution and TLS roots come from the host.
var etcNetwork = []string{"/etc/resolv.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/gai.conf"}

// Generated /etc files: a user table with only root and the sandbox user, so
// getpwuid works and nothing about the host's accounts is revealed.
var etcGenerated = []struct{ path, data string }{
	{"/etc/passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:" + SandboxWorkdir + ":/usr/sbin/nologin\n"},
	{"/etc/group", "root:x:0:\nnogroup:x:65534:\n"},
	{"/etc/hosts", "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"},
	{"/etc/hostname", "rlm\n"},
	{"/etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"},
}

// The merged-/usr links (or directories on older systems).
var rootLinks = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// bwrapPlan is a bwrap command line plus the data it reads from descriptors.
type bwrapPlan struct {
	args   []string
	files  []string // data for each descriptor the args name, in fd order
	infoFD int      // the --info-fd descriptor, numbered after files
	// The prelude's pipes, numbered right after the caller's ExtraFiles (and
	// before the data files), so they are single digits that dash can close:
	// it writes one byte to readyFD once the sandbox is set up, then execs
	// the program only after reading "go" from goFD (see the package doc's
	// working directory contract).
	readyFD, goFD int
}

// maxNamespaceExtraFiles keeps the prelude's descriptors below 10, the
// highest a POSIX shell can name.
const maxNamespaceExtraFiles = 5

// prelude runs inside the finished sandbox before the program: it reports
// that /workspace exists (so the host can fill it through /proc/PID/root),
// waits for the host's "go", closes both pipes and execs the program. Any
// other answer (the host gave up and closed the pipe) ends it without
// running the program.
const prelude = `printf r >&%[1]d; read -r go <&%[2]d; exec %[1]d>&- %[2]d<&-; [ "$go" = go ] || exit 125; exec "$@"`

// planBwrap builds the bwrap arguments. firstFD is the first descriptor after
// the caller's ExtraFiles (3 + len(spec.ExtraFiles)): the prelude's two
// pipes take it and the next, then come the data files, then --info-fd.
// st maps each of spec.ReadOnlyPaths to the host path bwrap binds it from.
func planBwrap(bwrap string, spec *Spec, st *stage, firstFD int, seccomp []byte) (*bwrapPlan, error) {
	p := &bwrapPlan{readyFD: firstFD, goFD: firstFD + 1}
	fd := firstFD + 2
	add := func(a ...string) { p.args = append(p.args, a...) }
	addData := func(data string) string {
		p.files = append(p.files, data)
		fd++
		return strconv.Itoa(fd - 1)
	}
	add(bwrap,
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--uid", "65534", "--gid", "65534",
		"--hostname", "rlm")
	if spec.AllowNetwork {
		add("--share-net")
	}
	if spec.AsInit {
		add("--as-pid-1")
	}
	add("--ro-bind", "/usr", "/usr")
	for _, l := range rootLinks {
		fi, err := os.Lstat(l)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(l)
			if err != nil {
				return nil, err
			}
			add("--symlink", t, l)
		case fi.IsDir():
			add("--ro-bind", l, l)
		}
	}
	etc := etcAlways
	if spec.AllowNetwork {
		etc = append(append([]string{}, etcAlways...), etcNetwork...)
	}
	for _, e := range etc {
		if _, err := os.Stat(e); err == nil {
			add("--ro-bind", e, e)
		}
	}
	for _, g := range etcGenerated {
		if spec.AllowNetwork && g.path == "/etc/hosts" {
			if _, err := os.Stat("/etc/hosts"); err == nil {
				add("--ro-bind", "/etc/hosts", "/etc/hosts")
				continue
			}
		}
		add("--perms", "0444", "--ro-bind-data", addData(g.data), g.path)
	}
	tmp := strconv.FormatInt(spec.tmpBytes(), 10)
	add("--proc", "/proc", "--dev", "/dev",
		"--size", tmp, "--perms", "1777", "--tmpfs", "/tmp",
		"--size", tmp, "--perms", "1777", "--tmpfs", "/dev/shm")
	for _, ro := range spec.ReadOnlyPaths {
		if err := checkReadOnlyPath(ro); err != nil {
			return nil, err
		}
		add("--ro-bind", st.source(ro), ro)
	}
	add("--size", strconv.FormatInt(spec.diskBytes(), 10), "--perms", "0700", "--tmpfs", SandboxWorkdir,
		"--symlink", SandboxWorkdir, HomeAlias,
		"--chdir", SandboxWorkdir, "--remount-ro", "/")
	add("--seccomp", addData(string(seccomp)))
	// bwrap writes the host pid of the sandbox's pid 1 here; the descriptor
	// comes right after the data files.
	p.infoFD = fd
	add("--info-fd", strconv.Itoa(fd))
	add("--", "/bin/sh", "-c", fmt.Sprintf(prelude, p.readyFD, p.goFD), "sh")
	add(spec.Argv...)
	return p, nil
}

// checkReadOnlyPath refuses paths that would expose the whole host or shadow
// the sandbox's own mounts.
func checkReadOnlyPath(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("read-only path %q is not absolute", p)
	}
	c := filepath.Clean(p)
	if c == "/" {
		return fmt.Errorf("read-only path %q would expose the whole host filesystem", p)
	}
	if c == "/tmp" || c == "/etc" {
		return fmt.Errorf("read-only path %q would replace the sandbox's own %s", p, c)
	}
	for _, bad := range []string{"/proc", "/dev", "/sys", SandboxWorkdir} {
		if c == bad || strings.HasPrefix(c, bad+"/") {
			return fmt.Errorf("read-only path %q would shadow the sandbox's %s", p, bad)
		}
	}
	if _, err := os.Stat(c); err != nil {
		return fmt.Errorf("read-only path: %w", err)
	}
	return nil
}
