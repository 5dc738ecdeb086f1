//go:build !linux

package program

import "os"

// outputPipe is os.Pipe where pipe2 is not (see pipe_linux.go).
func outputPipe() (r, w *os.File, err error) { return os.Pipe() }
