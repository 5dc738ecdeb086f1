package runtimepb

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
)

// The translation of errors, both ways: a runtime's error becomes a gRPC
// status in the plugin (Status, called by core/plugin's adapter and the
// daemon) and the status becomes core's error again in the host (Error,
// called by core/client). The pairs: core.RefusedError Invalid ⇄
// InvalidArgument, Unavailable ⇄ FailedPrecondition; core.ErrUnsupported ⇐
// Unimplemented; core.ErrRuntimeLost ⇐ Unavailable (the connection, not
// the runtime, failed); a context's end ⇄ Canceled or DeadlineExceeded;
// anything else is Internal and comes back as its text.

// Status is err as the gRPC status a host expects. An error that already is
// a status passes as it is.
func Status(err error) error {
	if err == nil {
		return nil
	}
	var refused *core.RefusedError
	if errors.As(err, &refused) {
		return status.Error(refusalCode(refused.Kind), err.Error())
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// Error turns a gRPC status error into core's error a user can read and a
// caller can test (errors.Is, errors.As); other errors pass as they are.
func Error(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Unimplemented:
		return fmt.Errorf("%w: %s", core.ErrUnsupported, st.Message())
	case codes.Unavailable:
		return fmt.Errorf("%w: %s", core.ErrRuntimeLost, st.Message())
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.InvalidArgument:
		return &core.RefusedError{Kind: core.Invalid, Msg: st.Message()}
	case codes.FailedPrecondition:
		return &core.RefusedError{Kind: core.Unavailable, Msg: st.Message()}
	}
	return errors.New(st.Message())
}

func refusalCode(k core.RefusalKind) codes.Code {
	if k == core.Unavailable {
		return codes.FailedPrecondition
	}
	return codes.InvalidArgument
}
