// Package plugin is what a runtime plugin author imports: Runtime (the
// interface to implement), Serve, and the session helpers.
//
// A plugin is a separate executable named rlm-plugin-NAME
// (core/runtimepb.Prefix) that calls Serve with an implementation of
// Runtime; the adapter (NewServer) speaks the runtime service
// (core/runtimepb: the wire, the handshake, the go-plugin plugin set) for
// it, so a runtime only ever sees core's types. The five built-in runtimes use exactly this package, so a third-party
// plugin is as capable as they are. Starting plugins is the host's business
// (internal/host/launch): this package links no launcher and no sandbox code, so
// neither does a plugin.
//
// # Notes
//
//   - Only gRPC is offered: the Session RPC is a bidirectional stream, which
//     net/rpc cannot carry.
//   - The protocol is versioned through go-plugin's VersionedPlugins. A host
//     and plugin with no version in common fail at start with an error naming
//     the binary and both version lists.
//   - A plugin must not write to stdout before the handshake; go-plugin reads
//     its first stdout line as the handshake. Log to stderr (Logger does).
package plugin
