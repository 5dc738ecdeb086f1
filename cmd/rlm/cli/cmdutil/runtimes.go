package cmdutil

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/host/launch"
)

// BuiltinRuntimes are the runtimes rlm ships plugins for, in the order a
// server tries them.
var BuiltinRuntimes = []string{"python", "golang", "node", "shell", "c", "cpp", "java", "rust"}

// UnknownRuntime is the usage error (exit 2) for err when it says that no
// plugin answers to a name rlm does not ship (a typo, or a third-party
// runtime not installed): every command that names runtimes (exec
// --runtime, serve --mode, daemon --runtimes) says the same thing, naming
// the built-in ones and how to list what is installed. kind is what the
// command calls a runtime ("runtime", "mode"). It returns nil for any
// other error, a built-in runtime whose plugin is missing included: the
// command reports that its own way.
func UnknownRuntime(err error, kind string) error {
	var nf *launch.NotFoundError
	if !errors.As(err, &nf) || slices.Contains(BuiltinRuntimes, nf.Name) || nf.Name == client.Pyodide {
		return nil
	}
	return Usage(fmt.Errorf("unknown %s %q: use %s, or install a plugin named %s%s ('rlm plugins' lists those installed)",
		kind, nf.Name, strings.Join(BuiltinRuntimes, ", "), runtimepb.Prefix, nf.Name))
}
