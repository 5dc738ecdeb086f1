package servecmd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
)

// keepHoldable is checkIsolation for a server without --mode: a runtime
// found on the host whose programs cannot run at the configured level, or
// cannot hold the limits given as flags, is left out with a log line
// saying why, instead of stopping a server that was never asked to serve
// it (a third-party plugin declaring only process under --isolation
// namespace, say). The server stops, with every reason, only when no
// runtime is left.
func keepHoldable(ctx context.Context, modes []string, rts map[string]*client.Runtime, limits core.Limits, logger *slog.Logger) ([]string, error) {
	var kept, reasons []string
	for _, m := range modes {
		if _, err := rts[m].Sandbox(ctx, limits, false); err != nil {
			logger.Info("runtime not enabled: it cannot hold the configured isolation or limits", "runtime", m, "reason", err.Error())
			reasons = append(reasons, fmt.Sprintf("%s: %v", m, err))
			rts[m].Close()
			delete(rts, m)
			continue
		}
		kept = append(kept, m)
	}
	if len(kept) == 0 {
		return nil, cmdutil.Usagef("no runtime to serve: none found here holds the configured isolation and limits:\n  %s", strings.Join(reasons, "\n  "))
	}
	return kept, nil
}
