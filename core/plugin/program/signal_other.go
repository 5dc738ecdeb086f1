//go:build !unix

package program

import "syscall"

func signalName(s syscall.Signal) string { return s.String() }
