package server

import "github.com/rlmkit/rlm/core/ending"

// limitSettings say, for each ending a limit caused, how a client of the
// server raises that limit: the request field for the timeout (see
// docs/openapi.json), the server's own setting for the sandbox limits,
// which no request can change. Runtimes report only the ending and the
// limit; the CLI words the same hints as its flags (cmd/rlm/cli/cmdutil).
var limitSettings = map[ending.Reason]string{
	ending.Timeout:      "timeout_ms or timeout_seconds (up to the server's max timeout)",
	ending.MemoryLimit:  "the server's limits.memory (rlm serve --memory)",
	ending.ProcessLimit: "the server's limits.max_processes (rlm serve --max-processes)",
	ending.DiskLimit:    "the server's limits.max_disk (rlm serve --max-disk)",
	ending.CPULimit:     "the server's limits.cpu (rlm serve --cpu)",
}

// hint is msg, the error of a run that ended, with how to raise the limit
// that ended it.
func hint(why ending.Reason, msg string) string {
	return ending.Hint(msg, limitSettings[why])
}
