package ending

import (
	"fmt"
	"time"
)

// The one table of what rlm says when it ended a run, or saw a limit end
// it: every run path (the native program runner, the native REPL, the
// WebAssembly runtime's programs and cells) words an ending from here.
// Each sentence states the fact, with the limit when the caller knows it;
// how to raise that limit is the host's to add (Hint), in its own terms.
var messages = map[Reason]struct {
	text  string // without the limit
	limit string // with it: a format taking the limit
}{
	Timeout:      {"timed out", "timed out after %s"},
	CPULimit:     {"used up its CPU time", "used up its CPU time of %s"},
	MemoryLimit:  {"reached the memory limit", "reached the memory limit of %d bytes"},
	OutputLimit:  {"killed after writing too much output", "killed after writing more than %d bytes of output"},
	ProcessLimit: {"reached the process limit", "reached the process limit of %d processes"},
	DiskLimit:    {"filled the working directory's size limit", "filled the working directory's size limit of %d bytes"},
	Fuel:         {"used up its fuel", "used up its fuel budget of %d units"},
	Cancelled:    {"cancelled", "cancelled"},
	Crashed:      {"the interpreter died", "the interpreter died"},
}

// Message is the user-facing sentence for the ending r: "timed out after
// 2s". limit is the limit that ended the run, 0 when the caller does not
// know it: nanoseconds (a time.Duration) for Timeout and CPULimit, bytes
// for MemoryLimit, OutputLimit and DiskLimit, fuel units for Fuel,
// processes for ProcessLimit. Endings rlm has no sentence for (Exit,
// Signal, InstallFailed: the program's or the installer's own words tell
// those) give "".
func (r Reason) Message(limit int64) string {
	m, ok := messages[r]
	if !ok {
		return ""
	}
	if limit <= 0 {
		return m.text
	}
	switch r {
	case Timeout, CPULimit:
		return fmt.Sprintf(m.limit, time.Duration(limit))
	case Cancelled, Crashed:
		return m.text
	}
	return fmt.Sprintf(m.limit, limit)
}

// Hint appends to msg how to raise the limit that ended a run, worded by
// the host that shows it: how is a flag for the CLI ("--memory (config:
// limits.memory)"), a request field or a server setting for HTTP. msg
// comes back unchanged when how or msg is empty. Plugins do not call it:
// they report the ending and the limit, and only the host knows how its
// user sets that limit.
func Hint(msg, how string) string {
	if msg == "" || how == "" {
		return msg
	}
	return msg + "; raise it with " + how
}
