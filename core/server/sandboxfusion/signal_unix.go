//go:build unix

package sandboxfusion

import "golang.org/x/sys/unix"

// signalNumber is the number of a signal rlm names ("SIGKILL" → 9), 0 when
// unknown.
func signalNumber(name string) int { return int(unix.SignalNum(name)) }
