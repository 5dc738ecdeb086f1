// Package ending names how a run or a cell ended. It is the one definition
// of that idea: the sandbox (internal/sandbox/isolate), the plugins, the engine and
// core.Result all use Reason; core/runtimepb's translation carries it on
// the wire. It is a leaf below core so that the sandbox
// (internal/sandbox/isolate), which reports endings too, links nothing else.
package ending

// Reason is how a run ended, as the lower-case name JSON shows.
type Reason string

// The endings. Not every backend reports every one: the sandbox knows
// limits, the WebAssembly runtime fuel, the host installs.
const (
	Exit          Reason = "exit"           // the program exited by itself (any status)
	Timeout       Reason = "timeout"        // the wall-clock limit or the context's deadline passed
	Signal        Reason = "signal"         // a signal nobody on rlm's side sent killed it
	MemoryLimit   Reason = "memory_limit"   // the memory limit was reached
	OutputLimit   Reason = "output_limit"   // it wrote past the output flood limit
	ProcessLimit  Reason = "process_limit"  // a fork failed at the process limit
	Fuel          Reason = "fuel"           // the WebAssembly fuel ran out
	Cancelled     Reason = "cancelled"      // the caller cancelled it
	Crashed       Reason = "crashed"        // the interpreter or the runtime died
	InstallFailed Reason = "install_failed" // the requirements did not install
	DiskLimit     Reason = "disk_limit"     // the working directory filled its size limit
	CPULimit      Reason = "cpu_limit"      // the CPU-seconds budget ran out (RLIMIT_CPU)
)
