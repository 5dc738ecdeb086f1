package python

import (
	"fmt"
	"os"
	"time"

	"github.com/rlmkit/rlm/core/isolate"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/program"
	pb "github.com/rlmkit/rlm/core/proto"
	"github.com/rlmkit/rlm/plugins/python/internal/repl"
)

// Session serves one REPL over the bidirectional stream (core/plugin's
// ServeSession does the routing once the interpreter is up).
func (s *Server) Session(stream pb.Runtime_SessionServer) error {
	open, err := plugin.ReceiveOpen(stream)
	if err != nil {
		return err
	}
	t, err := s.Tool()
	if err != nil {
		return plugin.SendFatal(stream, "python runtime unavailable: "+err.Error())
	}
	level, rlimits, err := sessionIsolation(open.GetLimits())
	if err != nil {
		return plugin.SendFatal(stream, err.Error())
	}
	dir, err := os.MkdirTemp("", "rlm-session-")
	if err != nil {
		return plugin.SendFatal(stream, "creating the session directory: "+err.Error())
	}
	defer os.RemoveAll(dir)
	env := append(program.BaseEnv(dir), "PYTHONDONTWRITEBYTECODE=1")
	for k, v := range open.GetEnv() {
		env = append(env, k+"="+string(v))
	}
	start := time.Now()
	proc, err := repl.Start(stream.Context(), repl.Config{
		Python:         t.Exe,
		Env:            env,
		Dir:            dir,
		MaxOutputBytes: open.GetLimits().GetMaxOutputBytes(),
		Context:        open.GetContext(),
		Rlimits:        rlimits,
	})
	if err != nil {
		return plugin.SendFatal(stream, "starting python: "+err.Error())
	}
	defer proc.Close()
	if err := stream.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Opened{Opened: &pb.Opened{
		RuntimeVersion: t.Version, Backend: "native", StartupMs: time.Since(start).Milliseconds()}}}); err != nil {
		return err
	}
	return plugin.ServeSession(stream, proc, plugin.SessionOptions{
		Backend: "native", Isolation: string(level), Wall: time.Duration(open.GetLimits().GetWallMs()) * time.Millisecond,
	})
}

// sessionIsolation is what a REPL session can honour of the requested
// isolation. The interpreter lives as long as the session and talks over
// pipes the driver owns, so it is not started through core/isolate: at
// level process it gets the same rlimits core/isolate gives a program
// (memory through RLIMIT_DATA, so a runaway allocation is a MemoryError
// in the cell, not a dead session; processes; file size), in its own
// process group with the scrubbed environment and a private directory.
// CPU time is not limited: it would add up over every cell of the session
// (each cell's wall clock is). Namespace isolation of sessions is not
// implemented, and asking for it is an error rather than a quiet downgrade.
func sessionIsolation(l *pb.Limits) (isolate.Level, []repl.Rlimit, error) {
	level, err := isolate.ParseLevel(l.GetIsolation())
	if err != nil {
		return "", nil, err
	}
	switch level {
	case isolate.LevelNone:
		return level, nil, nil
	case isolate.LevelNamespace:
		return "", nil, fmt.Errorf("isolation namespace is not available for python REPL sessions (rlm run, exec --context): use --isolation process, or --backend pyodide for a WebAssembly sandbox")
	}
	spec := isolate.Spec{MemoryBytes: l.GetMemoryBytes(), MaxProcesses: l.GetMaxProcesses(), FileSizeBytes: l.GetMaxDiskBytes()}
	var out []repl.Rlimit
	for _, r := range isolate.Rlimits(spec, false, false) {
		out = append(out, repl.Rlimit{Resource: r.Resource, Cur: r.Cur, Max: r.Max})
	}
	return level, out, nil
}
