package daemon

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The admin service sits beside the runtime service on the socket. It is
// declared by hand with well-known message types (no .proto of its own):
// Status returns the daemon's Status as JSON, Stop starts a graceful stop
// (portable, unlike SIGTERM).
const (
	adminService = "rlm.daemon.v1.Admin"
	statusMethod = "/" + adminService + "/Status"
	stopMethod   = "/" + adminService + "/Stop"
)

type adminServer interface{ admin() *Server }

func (s *Server) admin() *Server { return s }

func registerAdmin(g *grpc.Server, s *Server) {
	g.RegisterService(&grpc.ServiceDesc{
		ServiceName: adminService,
		HandlerType: (*adminServer)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Status", Handler: func(srv any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				if err := dec(new(emptypb.Empty)); err != nil {
					return nil, err
				}
				b, err := json.Marshal(srv.(adminServer).admin().Status())
				if err != nil {
					return nil, err
				}
				return wrapperspb.Bytes(b), nil
			}},
			{MethodName: "Stop", Handler: func(srv any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				if err := dec(new(emptypb.Empty)); err != nil {
					return nil, err
				}
				srv.(adminServer).admin().Stop()
				return new(emptypb.Empty), nil
			}},
		},
		Metadata: "core/daemon/admin.go",
	}, s)
}
