package runtimepb

// AcceptedHeader is the response header a runtime server sends as soon as
// it receives a Run request, before it starts the program (core/plugin's
// ServerOptions add it to every plugin and to the daemon). A host whose
// connection is lost uses it to tell the two cases apart: without it the
// request never reached a live plugin and may be sent again; with it the
// program may have started (and partly run), so sending it again would run
// the user's program twice. Plugins built before the header existed never
// send it, and get the old behaviour (one retry).
const AcceptedHeader = "rlm-run-accepted"

// PanickedTrailer is the response trailer a runtime server sets on a call
// whose handler panicked (ServerOptions recover it): the call's status
// carries the panic and its stack, and the process is no longer to be
// trusted. A host reports a Run that panicked as crashed, never runs it
// again, and stops the plugin.
const PanickedTrailer = "rlm-plugin-panicked"
