package cmdutil

import (
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

// limitFlags say, for each ending a limit the user sets caused, how a user
// of the CLI raises that limit: the flag, and the configuration key. (The
// timeout's message names its value and the flag is in every help; it
// stays without a hint, as rlm exec has always printed it.)
var limitFlags = map[ending.Reason]string{
	ending.MemoryLimit:  "--memory (config: limits.memory)",
	ending.ProcessLimit: "--max-processes (config: limits.max_processes)",
	ending.DiskLimit:    "--max-disk (config: limits.max_disk)",
	ending.CPULimit:     "--cpu (config: limits.cpu)",
}

// AddHint appends to r's error how to raise the limit that ended the run,
// in the CLI's terms. Plugins report only the ending and the limit; the
// host that shows the result says how its user changes it (core/server
// says it in its own terms).
func AddHint(r *core.Result) {
	if r == nil {
		return
	}
	r.Error = ending.Hint(r.Error, limitFlags[r.EndedBy])
}
