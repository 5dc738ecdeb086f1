package runtimepb

// The go-plugin glue shared by the host (internal/host/launch) and the
// plugins (core/plugin.Serve): the handshake, the one-service plugin set
// under every protocol version, and the gRPC options both sides use.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ProtocolVersion is the runtime service version this build speaks. Bump it
// when a change would break older peers; keep serving the old version beside
// the new one for a while.
const ProtocolVersion = 1

// Prefix starts every plugin executable's name: the host finds the plugin
// for runtime NAME as rlm-plugin-NAME.
const Prefix = "rlm-plugin-"

// pluginKey names the one service in the plugin set.
const pluginKey = "runtime"

// Handshake is shared by host and plugins. The cookie only stops a user from
// running a plugin binary by hand by mistake; it is not a security measure.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "RLM_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "d3f1c0a8-rlm-runtime-plugin",
}

// maxMessage lifts gRPC's 4 MiB default: a session's context can be hundreds
// of megabytes and results carry produced files.
const maxMessage = math.MaxInt32

// GRPCPlugin adapts the runtime service to go-plugin: a plugin serves Impl,
// and a host (Impl nil) gets a RuntimeClient from it.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl RuntimeServer
}

// GRPCServer registers Impl on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	RegisterRuntimeServer(s, p.Impl)
	return nil
}

// GRPCClient is the host's side: a client of the runtime service.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (interface{}, error) {
	return NewRuntimeClient(c), nil
}

// PluginSet is the one-service set go-plugin serves and dispenses (impl is
// nil on the host's side).
func PluginSet(impl RuntimeServer) goplugin.PluginSet {
	return goplugin.PluginSet{pluginKey: &GRPCPlugin{Impl: impl}}
}

// VersionedPlugins is PluginSet under every protocol version this build
// speaks, for go-plugin's ServeConfig and ClientConfig.
func VersionedPlugins(impl RuntimeServer) map[int]goplugin.PluginSet {
	return map[int]goplugin.PluginSet{ProtocolVersion: PluginSet(impl)}
}

// Dispense takes the runtime client from a connected go-plugin client (a
// launched plugin's, or goplugin.TestPluginGRPCConn's in tests).
func Dispense(c goplugin.ClientProtocol) (RuntimeClient, error) {
	raw, err := c.Dispense(pluginKey)
	if err != nil {
		return nil, err
	}
	return raw.(RuntimeClient), nil
}

// ServerOptions are the gRPC options every runtime server uses, in plugins
// and in the daemon alike. They include acceptRuns, so that a host can tell
// a request that never arrived from one whose program may have run.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage),
		grpc.InitialWindowSize(flowWindow), grpc.InitialConnWindowSize(flowWindow),
		grpc.UnaryInterceptor(acceptRuns), grpc.NumStreamWorkers(streamWorkers())}
}

// streamWorkers is how many goroutines serve calls, kept between calls. A
// goroutine started for each call (gRPC's default) grows its stack again
// on every run, through a handler chain deep enough to copy it twice or
// three times: 8-12 % of a plugin's CPU under load. Calls beyond this many
// at once still get a goroutine of their own.
func streamWorkers() uint32 {
	return uint32(max(8, 2*runtime.GOMAXPROCS(0)))
}

// flowWindow is both ends' HTTP/2 flow-control window, per stream and per
// connection. Setting it turns off gRPC's bandwidth-delay estimation,
// which answered every request and every response with a WINDOW_UPDATE
// and a PING, and the PING with its ack: two more writes, reads and
// goroutine wake-ups on each side of every call, for a link (a Unix socket
// to a child process) that has no delay to estimate. A window this large
// lets a whole run's result (outputs are capped far below it) go without
// waiting for an update.
const flowWindow = 16 << 20

// runMethod is the full gRPC name of Runtime.Run.
const runMethod = "/rlm.runtime.v1.Runtime/Run"

// acceptRuns sends AcceptedHeader before a Run request is handled: a
// host that then loses the connection knows the program may have started
// and reports it as crashed instead of running it again.
//
// It also recovers a handler's panic. Left alone, gRPC lets the panic kill
// the process at once, before the header queued above is written (the
// host would see a connection lost before its request arrived, and run
// the program again) and with the panic visible only in a stderr the host
// discards. Recovered, the panic and its stack go to stderr as Go prints
// them, and the call fails with them in its status and PanickedTrailer
// set, which the host reports (a Run as crashed) and then kills the
// plugin: nothing is served by a process whose state a panic may have
// broken.
func acceptRuns(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if info.FullMethod == runMethod {
		_ = grpc.SendHeader(ctx, metadata.Pairs(AcceptedHeader, "1"))
	}
	defer func() {
		if v := recover(); v != nil {
			// Taken before the deferred call returns: the stack still
			// holds the frames that panicked.
			stack := panicStack(debug.Stack())
			fmt.Fprintf(os.Stderr, "panic: %v\n\n%s", v, stack)
			_ = grpc.SetTrailer(ctx, metadata.Pairs(PanickedTrailer, "1"))
			if len(stack) > maxPanicStack {
				stack = append(stack[:maxPanicStack:maxPanicStack], "\n..."...)
			}
			resp, err = nil, status.Errorf(codes.Internal, "panic: %v\n\n%s", v, bytes.ToValidUTF8(stack, nil))
		}
	}()
	return handler(ctx, req)
}

// panicStack is a stack taken in a deferred recover without the frames of
// the recovery itself (debug.Stack, the deferred function, panic): the
// goroutine line, then the frame that panicked.
func panicStack(stack []byte) []byte {
	first, rest, ok := bytes.Cut(stack, []byte("\n"))
	i := bytes.Index(rest, []byte("\npanic("))
	if !ok || i < 0 {
		return stack
	}
	_, after, _ := bytes.Cut(rest[i+1:], []byte("\n")) // panic(...)
	_, after, _ = bytes.Cut(after, []byte("\n"))       // its file:line
	return append(append(first, '\n'), after...)
}

// maxPanicStack bounds the stack a recovered panic's status carries: its
// head, where the panic is.
const maxPanicStack = 8 << 10

// DialOptions are the matching client options.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)),
		grpc.WithInitialWindowSize(flowWindow), grpc.WithInitialConnWindowSize(flowWindow)}
}

// sysmonAwake is the GODEBUG setting a host starts its plugins with
// (PluginEnv). The Go runtime's sysmon thread sleeps deeply whenever every
// P is idle, and the next system call that wakes it resets its poll
// interval to 20 µs: a plugin, idle between runs and busy for a fraction
// of a millisecond in each, had sysmon waking ~15 times a run, 13 % of its
// CPU in context switches on a 2-core VM. With schedtrace set, sysmon
// never sleeps deeply (proc.go: "sysmon should not enter deep sleep if
// schedtrace is enabled"), so its interval grows to 10 ms as in any busy
// Go program. It then also prints a scheduler trace to the plugin's
// stderr every 2^31-1 ms (24.8 days) of the machine's uptime, and before
// the report of a fatal error; the host keeps that report from its
// "panic: " or "fatal error: " line (internal/host/launch's tailWriter).
// Measured: rlm serve's warm runs at 32 clients ~5 % faster
// (BENCHMARKS.md).
const sysmonAwake = "schedtrace=2147483647"

// hostGodebugEnv carries the host's own GODEBUG to the plugin, which puts
// it back (RestorePluginEnv) before it runs anything.
const hostGodebugEnv = "RLM_HOST_GODEBUG"

// PluginEnv is what a host adds to a plugin's environment: GODEBUG with
// sysmonAwake (the host's own settings after it, so they win), and the
// host's GODEBUG as it was, godebug.
func PluginEnv(godebug string) []string {
	v := sysmonAwake
	if godebug != "" {
		v += "," + godebug
	}
	return []string{"GODEBUG=" + v, hostGodebugEnv + "=" + godebug}
}

// RestorePluginEnv undoes PluginEnv in a plugin's own environment, so that
// the processes it starts (toolchains, interpreters) get the host's
// GODEBUG as it was; the runtime keeps the setting it started with.
func RestorePluginEnv() {
	godebug, ok := os.LookupEnv(hostGodebugEnv)
	if !ok {
		return
	}
	os.Unsetenv(hostGodebugEnv)
	if godebug == "" {
		os.Unsetenv("GODEBUG")
	} else {
		os.Setenv("GODEBUG", godebug)
	}
}
