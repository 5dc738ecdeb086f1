//go:build unix

package program

import (
	"io"
	"os"
	"syscall"
)

const noFollow = syscall.O_NOFOLLOW

func ioReadFull(f *os.File, b []byte) (int, error) { return io.ReadFull(f, b) }

// ownerToGive is dir's owner when this process is root and dir belongs to
// someone else: what PutFiles creates there is given to them.
func ownerToGive(dir os.FileInfo) (uid, gid int, ok bool) {
	st, isStat := dir.Sys().(*syscall.Stat_t)
	if !isStat || os.Geteuid() != 0 || (st.Uid == 0 && st.Gid == 0) {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
