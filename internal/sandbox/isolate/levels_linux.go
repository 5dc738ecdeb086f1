package isolate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
)

// Which levels this host can enforce: Available and its probe.

var (
	availMu    sync.Mutex
	availCache = map[Level]error{}
)

// Available returns nil when level can be used here, or an error that names
// what is missing and how to get it. The result of the real probe run for
// LevelNamespace is cached for the life of the process, and a pass also on
// disk (probecache_linux.go).
func Available(level Level) error {
	switch level {
	case LevelNone:
		return nil
	case LevelProcess:
		if _, err := os.Stat("/bin/sh"); err != nil {
			return fmt.Errorf("isolation \"process\" needs /bin/sh: %w", err)
		}
		return nil
	case LevelNamespace:
	default:
		return level.Check()
	}
	availMu.Lock()
	defer availMu.Unlock()
	if err, ok := availCache[level]; ok {
		return err
	}
	err := namespaceAvailable()
	availCache[level] = err
	return err
}

func bwrapPath() (string, error) {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("isolation \"namespace\" needs bubblewrap, and bwrap is not in PATH: install it (Debian/Ubuntu: apt-get install bubblewrap) or use isolation = \"process\"")
	}
	return p, nil
}

func setprivPath() (string, error) {
	p, err := exec.LookPath("setpriv")
	if err != nil {
		return "", errors.New("isolation \"namespace\" as root needs setpriv to run the sandbox as an unprivileged user, and setpriv is not in PATH: install it (Debian/Ubuntu: apt-get install util-linux) or use isolation = \"process\"")
	}
	return p, nil
}

func namespaceAvailable() error {
	if _, err := seccompProgram(); err != nil {
		return err
	}
	setpriv := ""
	if os.Geteuid() == 0 {
		p, err := setprivPath()
		if err != nil {
			return err
		}
		setpriv = p
	}
	bw, err := bwrapPath()
	if err != nil {
		return err
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return errors.New("user namespaces are disabled (user.max_user_namespaces = 0): enable them with sysctl -w user.max_user_namespaces=15000, or use isolation = \"process\"")
	}
	marker := namespaceProbeFile(bw, setpriv)
	if probePassed(marker) {
		return nil
	}
	out, err := exec.Command(bw, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version failed: %v", bw, err)
	}
	if v := strings.TrimSpace(strings.TrimPrefix(string(out), "bubblewrap")); versionLess(v, "0.8.0") {
		return fmt.Errorf("bubblewrap %s is too old: isolation \"namespace\" needs 0.8.0 or newer (--disable-userns, --size); upgrade bubblewrap or use isolation = \"process\"", v)
	}
	dir, err := os.MkdirTemp("", "rlm-isolate-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var stderr bytes.Buffer
	c := &Cmd{Stderr: &stderr, spec: Spec{Spec: isolation.Spec{Level: LevelNamespace, Argv: []string{"/usr/bin/true"}, Dir: dir}}, ctx: context.Background(), probe: true, initFD: -1}
	if err := c.Run(); err != nil {
		return fmt.Errorf("bubblewrap cannot start a sandbox here: %v", err)
	}
	if o := c.Outcome(); o.Ending != ending.Exit || o.ExitCode != 0 {
		msg := strings.TrimSpace(stderr.String())
		hint := ""
		if strings.Contains(msg, "uid map") || strings.Contains(msg, "namespace") || strings.Contains(msg, "Operation not permitted") {
			hint = " (user namespaces look disabled: check sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces and AppArmor's restrict_unprivileged_userns; a container may need --privileged or a seccomp profile that allows clone(CLONE_NEWUSER))"
		}
		return fmt.Errorf("bubblewrap cannot start a sandbox here: %s%s; use isolation = \"process\" until this is fixed", msg, hint)
	}
	rememberProbe(marker)
	return nil
}

func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 3; i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
