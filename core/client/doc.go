// Package client is the host's side of the runtime service: it decides
// what serves a runtime (a native plugin, the WebAssembly plugin, or the
// daemon) and connects to it (Open), and Runtime runs programs and REPL
// sessions on that connection, resolving each request's isolation against
// what the plugin declares and the host can enforce. Plugins and the
// daemon speak the same gRPC service, so Runtime is the only client.
// Supervisor keeps a Runtime for as long as an application runs, launching
// it again when it is lost: `rlm serve` and the daemon both use it.
//
// The CLI and the servers use it to build the core.SandboxFactory they
// hand the RLM engine; the engine never imports it.
package client
