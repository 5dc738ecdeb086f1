package native

import (
	"runtime/debug"
	"strings"

	"github.com/rlmkit/rlm/internal/version"
)

// rlmModule is the module rlm's built-in plugins are built from.
const rlmModule = "github.com/rlmkit/rlm"

// ownVersion is the version of the plugin binary's own module, for a
// Runtime that names none: a plugin built from rlm's module is rlm's
// version; a third-party plugin's is its module's version (`go install
// example.com/rlm-plugin-x@v1.2.0`), else its VCS revision (a build from a
// checkout: "a1b2c3d4e5f6", "-dirty" when modified), else "devel". It is
// never rlm's version: `rlm plugins` must not credit rlm's release with a
// third party's code.
func ownVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path == rlmModule || bi.Main.Path == "" {
		return version.String()
	}
	return moduleVersion(bi)
}

func moduleVersion(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return strings.TrimSpace(rev)
}
