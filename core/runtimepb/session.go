package runtimepb

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// StartSession opens a Session stream on c, sends open and waits for the
// runtime's Opened: the handshake every host of a session does (core's
// sessions and the daemon's warm workers). ctx bounds only the start; the
// stream lives until the returned cancel, which the caller then owns. The
// error is the stream's own (a gRPC status, for the caller to map), the
// refusal the runtime answered with, or ctx's when it ended first; on
// error nothing is left open.
func StartSession(ctx context.Context, c RuntimeClient, open *OpenSession) (Runtime_SessionClient, context.CancelFunc, *Opened, error) {
	sctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Session(sctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	if err := stream.Send(&SessionRequest{Msg: &SessionRequest_Open{Open: open}}); err != nil {
		if err == io.EOF {
			// The server already ended the stream (say, Unimplemented);
			// gRPC gives its real status to Recv, not to Send.
			if _, rerr := stream.Recv(); rerr != nil {
				err = rerr
			}
		}
		cancel()
		return nil, nil, nil, err
	}
	// Recv does not watch ctx (the stream's context is sctx), so the wait
	// for the first message runs aside and ctx can cut it short.
	type first struct {
		opened *Opened
		err    error
	}
	ch := make(chan first, 1)
	go func() {
		m, err := stream.Recv()
		switch {
		case err != nil:
			ch <- first{err: err}
		case m.GetError() != nil:
			ch <- first{err: errors.New(m.GetError().GetMessage())}
		case m.GetOpened() == nil:
			ch <- first{err: fmt.Errorf("the runtime answered open with %T, not Opened", m.GetMsg())}
		default:
			ch <- first{opened: m.GetOpened()}
		}
	}()
	select {
	case f := <-ch:
		if f.err != nil {
			cancel()
			return nil, nil, nil, f.err
		}
		return stream, cancel, f.opened, nil
	case <-ctx.Done():
		cancel()
		return nil, nil, nil, ctx.Err()
	}
}
