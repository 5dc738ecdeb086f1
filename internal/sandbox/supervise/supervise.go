// Package supervise runs one sandboxed program (an isolation.Spec) under
// internal/sandbox/isolate and reports how it ended as an isolation.Exit:
// Start for a plugin that links the sandbox (plugins/internal/inproc), and
// Supervise, the host's sandbox supervisor (`rlm __sandbox`), for a plugin
// that does not (core/plugin/native's HelperSandbox, which speaks to it in
// isolation.Spec and isolation.Report).
package supervise

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"syscall"

	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// Start runs spec under internal/sandbox/isolate with the given standard
// files; the end of ctx kills it.
func Start(ctx context.Context, spec isolation.Spec, stdin, stdout, stderr *os.File) (*Process, error) {
	cmd, err := isolate.Command(ctx, isolate.Spec{Spec: spec})
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		_ = cmd.Cleanup()
		return nil, err
	}
	return &Process{cmd: cmd, level: spec.Level}, nil
}

// Process is a program started by Start; it is a core/plugin/program
// Process and Killer.
type Process struct {
	cmd   *isolate.Cmd
	level isolation.Level
}

// Pid is the sandbox's process group.
func (p *Process) Pid() int { return p.cmd.Pid() }

// Kill kills the sandbox; Wait still cleans it up.
func (p *Process) Kill() { _ = p.cmd.Kill() }

// Wait waits for the program, cleans up its sandbox and says how it ended.
func (p *Process) Wait() (isolation.Exit, error) {
	err := p.cmd.Wait()
	o := p.cmd.Outcome()
	ex := isolation.Exit{
		Code:            o.ExitCode,
		PeakMemoryBytes: o.PeakMemoryBytes,
		Isolation:       p.level,
		EndedBy:         o.Ending,
	}
	if o.Signal != "" {
		ex.Signal = syscall.Signal(o.SignalNumber)
		ex.Code = 0
	}
	return ex, err
}

// Supervise is the host's sandbox supervisor (`rlm __sandbox`): it reads
// one isolation.Spec from spec, runs it with stdin, stdout and stderr as
// the program's standard files, and writes isolation.Reports to report:
// the sandbox's pid once started, then how the program ended. The end of
// ctx (the supervisor's SIGTERM) kills the sandbox, which is still cleaned
// up and reported. The error is only for failing to report.
func Supervise(ctx context.Context, spec io.Reader, report io.Writer, stdin, stdout, stderr *os.File) error {
	enc := json.NewEncoder(report)
	var s isolation.Spec
	if err := json.NewDecoder(spec).Decode(&s); err != nil {
		return enc.Encode(isolation.Report{Error: "reading the sandbox spec: " + err.Error()})
	}
	p, err := Start(ctx, s, stdin, stdout, stderr)
	if err != nil {
		return enc.Encode(isolation.Report{Error: err.Error()})
	}
	if err := enc.Encode(isolation.Report{Pid: p.Pid()}); err != nil {
		p.Kill() // nobody to report to: end the run, still cleaned up by Wait
	}
	ex, err := p.Wait()
	end := isolation.Report{Exit: &ex}
	if err != nil {
		end.Error = err.Error()
	}
	return enc.Encode(end)
}
