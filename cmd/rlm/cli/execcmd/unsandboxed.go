package execcmd

import (
	"context"
	"fmt"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
)

// warnUnsandboxed says on stderr, in one line, that prog is about to run
// unsandboxed: its runtime's plugin reaches only isolation none here
// (a plugin that declares no level), so the code runs as this user with
// the network on and the host's files readable. Untrusted code must not
// run so by accident. Asking for --isolation none ([limits] isolation =
// "none") is the choice made explicitly, and says nothing.
func warnUnsandboxed(ctx context.Context, rt *client.Runtime, o *Options, prog core.Program) {
	if prog.Limits.Isolation == "none" {
		return
	}
	session := prog.Context != nil && rt.Name == "python"
	level, err := rt.Isolation(ctx, prog.Limits.Isolation, session)
	if err != nil || level != "none" {
		// A refused level is reported by the run itself.
		return
	}
	fmt.Fprintf(o.F.IO.ErrOut, "rlm: warning: running %s unsandboxed (isolation none: as this user, network on, host files readable): no sandbox level its plugin declares works here; pass --isolation none to say this is intended\n", rt.Name)
}
