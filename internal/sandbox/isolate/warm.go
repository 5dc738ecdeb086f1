package isolate

// WorkspaceBytes is the size of the working directory's tmpfs a
// LevelNamespace run of spec gets (Spec.DiskBytes, or the default derived
// from MemoryBytes; see DefaultDiskBytes), for a caller that keeps
// sandboxes warm and must give each run the same cap.
func WorkspaceBytes(spec Spec) int64 { return spec.diskBytes() }
