package pycell

import "github.com/rlmkit/rlm/core/ending"

// exceptions name the Python exception each ending a runtime causes reads
// as in a cell's error and stderr (OutOfFuel and Crashed are the
// WebAssembly runtime's own names). Endings without one (a cancel) are
// reported as core/ending's sentence alone.
var exceptions = map[ending.Reason]string{
	ending.Timeout:     "TimeoutError",
	ending.MemoryLimit: "MemoryError",
	ending.Fuel:        "OutOfFuel",
	ending.Crashed:     "Crashed",
}

// Error words msg, the sentence for the ending why, as the Python
// exception line both Python runtimes report: "TimeoutError: timed out
// after 2s".
func Error(why ending.Reason, msg string) string {
	if name := exceptions[why]; name != "" {
		return name + ": " + msg
	}
	return msg
}

// Message is Error of core/ending's sentence for why and its limit.
func Message(why ending.Reason, limit int64) string {
	return Error(why, why.Message(limit))
}
