package plugin

import (
	"os"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// Serve runs rt as a plugin, behind the adapter (NewServer), and returns
// when the host is done with it. Call it from main; it never writes to
// stdout except the handshake line.
func Serve(rt Runtime) { ServeGRPC(NewServer(rt)) }

// ServeGRPC serves an implementation of the wire service itself, for what
// must speak it directly: a test's mock runtime (core/plugin/plugintest) that
// plays a misbehaving plugin. A plugin calls Serve.
func ServeGRPC(impl pb.RuntimeServer) {
	pb.RestorePluginEnv()
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  pb.Handshake,
		VersionedPlugins: pb.VersionedPlugins(impl),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, pb.ServerOptions()...)...)
		},
		Logger: Logger(),
	})
}

// Logger is the plugin-side logger: stderr, level from RLM_LOG_LEVEL
// (default warn), JSON so the host can re-level the lines it forwards.
func Logger() hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("RLM_LOG_LEVEL"))
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       "plugin",
		Level:      level,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}
