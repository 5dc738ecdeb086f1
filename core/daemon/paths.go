package daemon

import (
	"os"
	"path/filepath"
	"strings"
)

// Paths are where one daemon keeps its socket, pid file and log.
type Paths struct {
	// Socket is the Unix socket path, or the named pipe on Windows.
	Socket string
	// PID holds the daemon's process id; while the daemon runs it is
	// locked, which is how a second start knows one is running.
	PID string
	// Log receives the output of a daemon started with `rlm daemon start`.
	Log string
}

// PathsFor derives the pid and log files from socket ("" for the default):
// beside a socket file, with .pid and .log in place of its extension, so
// daemons on different sockets never share them; for a named pipe, in
// ~/.rlm named after the pipe.
func PathsFor(socket string) Paths {
	if socket == "" {
		socket = DefaultSocket()
	}
	var base string
	if name, ok := pipeName(socket); ok {
		base = filepath.Join(rlmDir(), name)
	} else {
		base = strings.TrimSuffix(socket, filepath.Ext(socket))
	}
	return Paths{Socket: socket, PID: base + ".pid", Log: base + ".log"}
}

// rlmDir is ~/.rlm (or .rlm in the working directory when there is no
// home).
func rlmDir() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ".rlm"
	}
	return filepath.Join(home, ".rlm")
}
