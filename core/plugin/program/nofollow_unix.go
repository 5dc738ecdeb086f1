//go:build unix

package program

import (
	"io"
	"os"
	"syscall"
)

const noFollow = syscall.O_NOFOLLOW

func ioReadFull(f *os.File, b []byte) (int, error) { return io.ReadFull(f, b) }
