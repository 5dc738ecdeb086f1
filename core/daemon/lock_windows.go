//go:build windows

package daemon

import (
	"os"

	"golang.org/x/sys/windows"
)

func lockFile(f *os.File) (bool, error) {
	// Lock one byte far beyond the content: Windows locks are mandatory,
	// and `rlm daemon status` must still read the pid.
	ol := &windows.Overlapped{OffsetHigh: 1}
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if err == windows.ERROR_LOCK_VIOLATION {
		return false, nil
	}
	return err == nil, err
}

func lockFree(path string) bool {
	_, err := os.Stat(path)
	return err != nil
}
