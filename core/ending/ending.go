// Package ending names how a run or a cell ended. It is the one definition
// of that idea: the sandbox (internal/sandbox/isolate), the plugins, the engine and
// core.Result all use Reason, and this package alone translates it to and
// from the wire's pb.EndedBy. It sits below core because core imports
// internal/sandbox/isolate, which must report endings too.
package ending

import pb "github.com/rlmkit/rlm/core/runtimepb"

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

// wire pairs every Reason with its pb.EndedBy; both directions use it.
var wire = map[Reason]pb.EndedBy{
	Exit:          pb.EndedBy_EXIT,
	Timeout:       pb.EndedBy_TIMEOUT,
	Signal:        pb.EndedBy_SIGNAL,
	MemoryLimit:   pb.EndedBy_MEMORY_LIMIT,
	OutputLimit:   pb.EndedBy_OUTPUT_LIMIT,
	ProcessLimit:  pb.EndedBy_PROCESS_LIMIT,
	Fuel:          pb.EndedBy_FUEL,
	Cancelled:     pb.EndedBy_CANCELLED,
	Crashed:       pb.EndedBy_CRASHED,
	InstallFailed: pb.EndedBy_INSTALL_FAILED,
	DiskLimit:     pb.EndedBy_DISK_LIMIT,
	CPULimit:      pb.EndedBy_CPU_LIMIT,
}

var fromWire = func() map[pb.EndedBy]Reason {
	m := make(map[pb.EndedBy]Reason, len(wire))
	for r, e := range wire {
		m[e] = r
	}
	return m
}()

// Proto is r on the wire; "" (and an unknown name) is
// ENDED_BY_UNSPECIFIED.
func (r Reason) Proto() pb.EndedBy { return wire[r] }

// FromProto is the wire's ending as a Reason. ENDED_BY_UNSPECIFIED, what a
// plugin sends when it says nothing, is Exit; so is a value newer than
// this build.
func FromProto(e pb.EndedBy) Reason {
	if r, ok := fromWire[e]; ok {
		return r
	}
	return Exit
}
