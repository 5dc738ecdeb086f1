//go:build !linux

package program

import "os"

// outputPipe and inputPipe are os.Pipe where pipe2 is not (see
// pipe_linux.go).
func outputPipe() (r, w *os.File, err error) { return os.Pipe() }

func inputPipe() (r, w *os.File, err error) { return os.Pipe() }
