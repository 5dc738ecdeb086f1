//go:build !unix

package program

import (
	"io"
	"os"
)

const noFollow = 0

func ioReadFull(f *os.File, b []byte) (int, error) { return io.ReadFull(f, b) }
