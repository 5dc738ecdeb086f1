package runtimepb

import "github.com/rlmkit/rlm/core/ending"

// endings pairs every ending.Reason with its EndedBy; both directions use it.
var endings = map[ending.Reason]EndedBy{
	ending.Exit:          EndedBy_EXIT,
	ending.Timeout:       EndedBy_TIMEOUT,
	ending.Signal:        EndedBy_SIGNAL,
	ending.MemoryLimit:   EndedBy_MEMORY_LIMIT,
	ending.OutputLimit:   EndedBy_OUTPUT_LIMIT,
	ending.ProcessLimit:  EndedBy_PROCESS_LIMIT,
	ending.Fuel:          EndedBy_FUEL,
	ending.Cancelled:     EndedBy_CANCELLED,
	ending.Crashed:       EndedBy_CRASHED,
	ending.InstallFailed: EndedBy_INSTALL_FAILED,
	ending.DiskLimit:     EndedBy_DISK_LIMIT,
	ending.CPULimit:      EndedBy_CPU_LIMIT,
}

var fromEndings = func() map[EndedBy]ending.Reason {
	m := make(map[EndedBy]ending.Reason, len(endings))
	for r, e := range endings {
		m[e] = r
	}
	return m
}()

// EndedByProto is r on the wire; "" (and an unknown name) is
// ENDED_BY_UNSPECIFIED.
func EndedByProto(r ending.Reason) EndedBy { return endings[r] }

// EndedByFromProto is the wire's ending as a Reason. ENDED_BY_UNSPECIFIED,
// what a plugin sends when it says nothing, is Exit; so is a value newer
// than this build.
func EndedByFromProto(e EndedBy) ending.Reason {
	if r, ok := fromEndings[e]; ok {
		return r
	}
	return ending.Exit
}
