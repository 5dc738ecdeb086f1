//go:build unix

package program

import (
	"os"
	"syscall"
	"time"
)

// tailMax bounds what takeBuffered reads: a writer that escaped the group
// may still be writing.
const tailMax = 1 << 20

// takeBuffered reads what the pipe r holds now, without waiting for more
// (its descriptor is non-blocking, as os.Pipe makes it), up to tailMax.
func takeBuffered(r *os.File, b []byte, keep func([]byte)) {
	if r.SetReadDeadline(time.Time{}) != nil {
		return
	}
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	left := tailMax
	_ = rc.Read(func(fd uintptr) bool {
		for left > 0 {
			n, err := syscall.Read(int(fd), b[:min(len(b), left)])
			if n <= 0 || err != nil {
				break
			}
			keep(b[:n])
			left -= n
		}
		return true
	})
}
