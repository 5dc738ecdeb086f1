// Package core is rlm's vocabulary: what a program, a REPL session, a
// limit set, a runtime's declaration and a result are, shared by the CLI,
// the servers, the RLM engine, the plugins and the sandbox. One Result
// shape serves every path (exec --json, POST /execute, sessions, MCP,
// WebAssembly).
//
// It is a leaf: it links no gRPC and no sandbox (a test, layers_test.go at
// the module root, keeps it so), so code that only speaks about runs pays
// for neither. The wire is core/runtimepb, the host's side core/client, and
// what plugin authors import core/plugin.
package core
