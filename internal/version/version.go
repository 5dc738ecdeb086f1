// Package version is rlm's own version, defined once: `rlm version`, the
// built-in plugins' Info, the HTTP server's /health and the MCP server
// all read it here. The Makefile sets it with
// -ldflags -X github.com/rlmkit/rlm/internal/version.Version=....
package version

import "runtime/debug"

// Version is set by the build; "dev" when it was not.
var Version = "dev"

// String is the version: Version when the build set it, else the module
// version a `go install` records, else "dev".
func String() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
