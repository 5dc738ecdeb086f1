package isolate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// The namespace probe (bwrap --version, then a real sandbox running
// /usr/bin/true) costs ~60-140 ms on this project's VM, and every rlm
// process that resolves an isolation level paid it: the CLI resolving
// auto, then the plugin it launches declaring its levels, twice per
// `rlm exec`. Its answer depends only on the host, so a positive answer is
// remembered on disk, keyed by everything it depends on: the boot (a
// reboot can change sysctls and kernels), the user, the bwrap and setpriv
// executables (path, size, mtime) and the sysctls that turn user
// namespaces off. A negative answer is never cached, so fixing the host
// takes effect at once; a stale positive one (a sysctl changed without a
// reboot) makes runs fail with bubblewrap's own error, never run weaker.

// probeCacheVersion changes when the probe itself changes.
const probeCacheVersion = "1"

// namespaceProbeFile is the marker file of a passed probe for this host
// state, or "" when there is no cache directory.
func namespaceProbeFile(bwrap, setpriv string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "v%s\x00uid=%d\x00%s\x00", probeCacheVersion, os.Geteuid(), runtime.GOARCH)
	for _, f := range []string{
		"/proc/sys/kernel/random/boot_id",
		"/proc/sys/kernel/osrelease",
		"/proc/sys/user/max_user_namespaces",
		"/proc/sys/kernel/unprivileged_userns_clone",
		"/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
	} {
		b, _ := os.ReadFile(f)
		fmt.Fprintf(h, "%s=%s\x00", f, b)
	}
	for _, exe := range []string{bwrap, setpriv} {
		if exe == "" {
			continue
		}
		st, err := os.Stat(exe)
		if err != nil {
			return ""
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", exe, st.Size(), st.ModTime().UnixNano())
	}
	return filepath.Join(dir, "rlm", "isolate", "namespace-"+hex.EncodeToString(h.Sum(nil))[:24]+".ok")
}

// probePassed reports whether file marks a passed probe.
func probePassed(file string) bool {
	if file == "" {
		return false
	}
	_, err := os.Stat(file)
	return err == nil
}

// rememberProbe marks a passed probe (best effort: without a writable
// cache directory the next process probes again).
func rememberProbe(file string) {
	if file == "" {
		return
	}
	if os.MkdirAll(filepath.Dir(file), 0o700) != nil {
		return
	}
	tmp := fmt.Sprintf("%s.tmp%d", file, os.Getpid())
	if os.WriteFile(tmp, nil, 0o600) == nil {
		_ = os.Rename(tmp, file)
	}
}
