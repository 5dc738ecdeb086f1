package isolate

// WorkspaceBytes is the size of the working directory's tmpfs a
// LevelNamespace run of spec gets (Spec.DiskBytes, or the default derived
// from MemoryBytes; see DefaultDiskBytes), for a caller that keeps
// sandboxes warm and must give each run the same cap.
func WorkspaceBytes(spec Spec) int64 { return spec.diskBytes() }

// WarmWorkerArg is the last argument of every warm sandbox's worker
// (plugins/internal/warm), so tools (and the leftover checks of rlm's own
// tests) can tell a live warm sandbox, which is meant to outlive the runs
// it served, from what a finished run left behind. It is here, not in the
// warm package, so that code outside plugins/ (testscripts) can name it.
const WarmWorkerArg = "rlm-warm-sandbox-worker"
