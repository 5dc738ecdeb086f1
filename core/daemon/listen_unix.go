//go:build !windows

package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// DefaultSocket is ~/.rlm/daemon.sock.
func DefaultSocket() string { return filepath.Join(rlmDir(), "daemon.sock") }

func pipeName(string) (string, bool) { return "", false }

// listen creates the socket: its directory 0700 (created if missing, and
// tightened if it is ~/.rlm), the socket itself 0600. The caller has made
// sure no live daemon owns an existing socket file.
func listen(socket string) (net.Listener, error) {
	// sun_path holds 108 bytes on Linux, 104 on macOS, with a final NUL.
	if len(socket) > 103 {
		return nil, fmt.Errorf("the socket path is %d bytes, more than Unix sockets allow (103): choose a shorter one with --socket", len(socket))
	}
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the socket's directory: %w", err)
	}
	if filepath.Clean(dir) == filepath.Clean(rlmDir()) {
		_ = os.Chmod(dir, 0o700)
	}
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("cannot remove the stale socket %s: %w", socket, err)
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", socket)
}

// socketExists reports whether something sits at the socket path.
func socketExists(socket string) bool {
	_, err := os.Lstat(socket)
	return err == nil
}

func removeSocket(socket string) { _ = os.Remove(socket) }

// present is a cheap first check before a ping: no socket file, no daemon.
func present(socket string) bool { return socketExists(socket) }
