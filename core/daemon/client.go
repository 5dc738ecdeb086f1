package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlmkit/rlm/core/client"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// PingTimeout bounds Alive: a daemon that does not answer this fast is
// treated as absent by the auto backend.
const PingTimeout = 100 * time.Millisecond

// NotRunningError says no daemon answers on a socket.
type NotRunningError struct {
	Socket string
	Err    error
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("no rlm daemon is running on %s (start one with `rlm daemon start`)", e.Socket)
}

func (e *NotRunningError) Unwrap() error { return e.Err }

// connect opens a gRPC connection over the socket; nothing is sent yet.
func connect(socket string) (*grpc.ClientConn, error) {
	if socket == "" {
		socket = DefaultSocket()
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx, socket) }),
	}, pb.DialOptions()...)
	return grpc.NewClient("passthrough:///rlm-daemon", opts...)
}

// ping asks the daemon's Info for itself.
func ping(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := pb.NewRuntimeClient(conn).Info(ctx, &pb.InfoRequest{}, grpc.WaitForReady(false))
	return err
}

// Alive reports whether a daemon answers on socket within PingTimeout.
//
// The auto backend calls Alive and then Dial; the connection Alive proved
// is kept for a Dial that follows within a second, so a command connects
// and pings once, not twice.
func Alive(ctx context.Context, socket string) bool {
	if socket == "" {
		socket = DefaultSocket()
	}
	if !present(socket) {
		return false // the common case without a daemon costs one stat
	}
	conn, err := connect(socket)
	if err != nil {
		return false
	}
	if ping(ctx, conn, PingTimeout) != nil {
		conn.Close()
		return false
	}
	proven.put(socket, conn)
	return true
}

// proven holds the last connection Alive proved.
var proven provenConn

type provenConn struct {
	mu     sync.Mutex
	socket string
	conn   *grpc.ClientConn
	at     time.Time
}

func (p *provenConn) put(socket string, conn *grpc.ClientConn) {
	p.mu.Lock()
	old := p.conn
	p.socket, p.conn, p.at = socket, conn, time.Now()
	p.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

// take returns the proven connection to socket if it is fresh; the caller
// owns it.
func (p *provenConn) take(socket string) *grpc.ClientConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conn
	if c == nil || p.socket != socket || time.Since(p.at) > time.Second {
		return nil
	}
	p.conn = nil
	return c
}

// Dial connects to the daemon on socket ("" for the default) for runtime.
// It fails with a NotRunningError when no daemon answers.
func Dial(ctx context.Context, socket, runtime string) (*client.Runtime, error) {
	if socket == "" {
		socket = DefaultSocket()
	}
	conn := proven.take(socket)
	if conn == nil {
		var err error
		if conn, err = connect(socket); err != nil {
			return nil, &NotRunningError{Socket: socket, Err: err}
		}
		if err := ping(ctx, conn, time.Second); err != nil {
			conn.Close()
			return nil, &NotRunningError{Socket: socket, Err: err}
		}
	}
	return client.NewRuntime(runtime, BackendName, pb.NewRuntimeClient(conn), func() { conn.Close() }, isolate.Available), nil
}

// GetStatus asks the daemon on socket for its status.
func GetStatus(ctx context.Context, socket string) (*Status, error) {
	p := PathsFor(socket)
	conn, err := connect(p.Socket)
	if err != nil {
		return nil, &NotRunningError{Socket: p.Socket, Err: err}
	}
	defer conn.Close()
	if err := ping(ctx, conn, time.Second); err != nil {
		return nil, &NotRunningError{Socket: p.Socket, Err: err}
	}
	out := new(wrapperspb.BytesValue)
	if err := conn.Invoke(ctx, statusMethod, new(emptypb.Empty), out); err != nil {
		return nil, fmt.Errorf("daemon status: %w", err)
	}
	var st Status
	if err := json.Unmarshal(out.GetValue(), &st); err != nil {
		return nil, fmt.Errorf("daemon status: %w", err)
	}
	return &st, nil
}

// ErrStopTimeout is returned by StopAndWait when the daemon outlives the wait.
var ErrStopTimeout = errors.New("the daemon did not stop in time")

// StopAndWait asks the daemon on socket to stop and waits until it has
// exited (its pid file lock is free), at most wait. It returns the pid that
// was stopped.
func StopAndWait(ctx context.Context, socket string, wait time.Duration) (int, error) {
	p := PathsFor(socket)
	conn, err := connect(p.Socket)
	if err != nil {
		return 0, &NotRunningError{Socket: p.Socket, Err: err}
	}
	defer conn.Close()
	if err := ping(ctx, conn, time.Second); err != nil {
		return 0, &NotRunningError{Socket: p.Socket, Err: err}
	}
	pid := ReadPID(p.PID)
	if err := conn.Invoke(ctx, stopMethod, new(emptypb.Empty), new(emptypb.Empty)); err != nil {
		return pid, fmt.Errorf("daemon stop: %w", err)
	}
	deadline := time.Now().Add(wait)
	for !lockFree(p.PID) {
		if time.Now().After(deadline) {
			return pid, ErrStopTimeout
		}
		select {
		case <-ctx.Done():
			return pid, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return pid, nil
}
