//go:build windows

package daemon

import (
	"context"
	"net"
	"strings"

	"github.com/Microsoft/go-winio"
)

const pipePrefix = `\\.\pipe\`

// DefaultSocket is the named pipe \\.\pipe\rlm-daemon.
func DefaultSocket() string { return pipePrefix + "rlm-daemon" }

func pipeName(socket string) (string, bool) {
	if strings.HasPrefix(strings.ToLower(socket), strings.ToLower(pipePrefix)) {
		return socket[len(pipePrefix):], true
	}
	return "", false
}

func pipePath(socket string) string {
	if _, ok := pipeName(socket); ok {
		return socket
	}
	return pipePrefix + socket
}

// listen creates the named pipe, readable and writable by its owner only.
func listen(socket string) (net.Listener, error) {
	return winio.ListenPipe(pipePath(socket), &winio.PipeConfig{
		// Owner full control, nobody else.
		SecurityDescriptor: "D:P(A;;GA;;;OW)",
	})
}

func dial(ctx context.Context, socket string) (net.Conn, error) {
	return winio.DialPipeContext(ctx, pipePath(socket))
}

// socketExists: a named pipe vanishes with its server, so never stale.
func socketExists(string) bool { return false }

func removeSocket(string) {}

// present cannot be checked without connecting on Windows.
func present(string) bool { return true }
