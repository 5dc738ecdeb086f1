package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// pidFile is the daemon's claim on its paths: the file holds its pid and
// stays locked while it runs, so the lock, not the pid (which may be
// reused), says whether a daemon is alive.
type pidFile struct {
	f    *os.File
	path string
}

func claimPIDFile(p Paths) (*pidFile, error) {
	if err := os.MkdirAll(filepath.Dir(p.PID), 0o700); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", filepath.Dir(p.PID), err)
	}
	f, err := os.OpenFile(p.PID, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open the pid file: %w", err)
	}
	ok, err := lockFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock the pid file %s: %w", p.PID, err)
	}
	if !ok {
		f.Close()
		return nil, &AlreadyRunningError{PID: ReadPID(p.PID), Socket: p.Socket}
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot write the pid file: %w", err)
	}
	return &pidFile{f: f, path: p.PID}, nil
}

// release removes the file, then drops the lock: a waiter that sees the
// lock free knows the daemon is done, and a daemon starting meanwhile never
// has its new file removed. Windows cannot remove an open file, so there
// the order is reversed (and waiters watch the file instead of the lock).
func (p *pidFile) release() {
	if runtime.GOOS == "windows" {
		_ = p.f.Close()
		_ = os.Remove(p.path)
		return
	}
	_ = os.Remove(p.path)
	_ = p.f.Close()
}

// ReadPID returns the pid in a pid file, 0 if there is none.
func ReadPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}
