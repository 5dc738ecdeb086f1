package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// HelperEnv names the variable through which rlm tells the plugins it
// starts where its sandbox supervisor is: the absolute path of the rlm
// binary, which supervises one sandboxed program as `rlm __sandbox`.
const HelperEnv = "RLM_SANDBOX_HELPER"

// HelperCommand is the hidden rlm subcommand that supervises one sandboxed
// program (with HelperRunFlag); with --levels it lists the levels the host
// enforces, one a line.
const HelperCommand = "__sandbox"

// HelperRunFlag asks the supervisor to run the program whose spec is on
// HelperSpecFD. It is explicit because descriptors 3 and 4 cannot tell a
// plugin's pipes from the Go runtime's own descriptors in a process
// started by hand.
const HelperRunFlag = "--run"

// The supervisor's descriptors besides the program's standard files: it
// reads one isolation.Spec (JSON) from HelperSpecFD and writes
// isolation.Reports to HelperReportFD.
const (
	HelperSpecFD   = 3
	HelperReportFD = 4
)

// HelperSandbox runs each sandboxed program through the host's supervisor
// (`Path __sandbox`): the supervisor builds the sandbox with internal/sandbox/isolate,
// the program's standard files are its own, and killing it (SIGTERM) kills
// the sandbox and still cleans up and reports. A plugin using it links no
// sandbox code and enforces exactly what the host can. It is the Sandbox
// of a Runtime that sets none, with Path from $RLM_SANDBOX_HELPER.
type HelperSandbox struct {
	// Path is the rlm binary; "" (a plugin not started by rlm) offers only
	// level none.
	Path string

	once   sync.Once
	levels []isolation.Level
	err    error // why levels above none are missing
}

var defaultSandbox = sync.OnceValue(func() Sandbox { return &HelperSandbox{Path: os.Getenv(HelperEnv)} })

// probe asks the supervisor once which levels the host enforces.
func (h *HelperSandbox) probe() {
	h.once.Do(func() {
		h.levels = []isolation.Level{isolation.None}
		if h.Path == "" {
			h.err = fmt.Errorf("no sandbox: the plugin was not started by rlm (%s is not set)", HelperEnv)
			return
		}
		out, err := exec.Command(h.Path, HelperCommand, "--levels").Output()
		if err != nil {
			h.err = fmt.Errorf("no sandbox: %s %s --levels: %v", h.Path, HelperCommand, err)
			return
		}
		for _, l := range isolation.ParseLevels(string(out)) {
			if l != isolation.None {
				h.levels = append(h.levels, l)
			}
		}
	})
}

// Levels implements Sandbox.
func (h *HelperSandbox) Levels() []isolation.Level {
	h.probe()
	return h.levels
}

// Available implements Sandbox.
func (h *HelperSandbox) Available(level isolation.Level) error {
	h.probe()
	switch {
	case slices.Contains(h.levels, level):
		return nil
	case h.err != nil:
		return h.err
	}
	return fmt.Errorf("this host cannot enforce it (%s %s --levels)", h.Path, HelperCommand)
}

// Spawner implements Sandbox. Cancellation needs nothing of ctx:
// program.Exec kills the process on it.
func (h *HelperSandbox) Spawner(_ context.Context, r SandboxRun) program.Spawner {
	return helperSpawner{path: h.Path, spec: r.Spec}
}

type helperSpawner struct {
	path string
	spec isolation.Spec
}

// Spawn implements program.Spawner: it starts the supervisor, hands it the
// spec and returns once the sandbox has started.
func (s helperSpawner) Spawn(argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (program.Process, error) {
	spec := s.spec
	spec.Argv, spec.Env, spec.Dir = argv, env, dir
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, err
	}
	cmd := exec.Command(s.path, HelperCommand, HelperRunFlag)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.ExtraFiles = []*os.File{specR, repW} // HelperSpecFD, HelperReportFD
	configureHelper(cmd)
	err = proctree.Start(cmd)
	specR.Close()
	repW.Close()
	if err == nil {
		_, err = specW.Write(data)
	}
	specW.Close()
	p := &helperProcess{cmd: cmd, reports: json.NewDecoder(repR), r: repR}
	if err != nil {
		if cmd.Process != nil {
			p.Kill()
			_, _ = p.Wait()
		}
		repR.Close()
		return nil, fmt.Errorf("sandbox supervisor: %w", err)
	}
	var started isolation.Report
	if err := p.reports.Decode(&started); err != nil || started.Error != "" || started.Pid <= 0 {
		_, werr := p.Wait()
		if started.Error != "" {
			return nil, errors.New(started.Error)
		}
		return nil, fmt.Errorf("sandbox supervisor %s: no sandbox started (%v)", s.path, errors.Join(err, werr))
	}
	p.pid = started.Pid
	return p, nil
}

// helperProcess is a program run by the supervisor.
type helperProcess struct {
	cmd     *exec.Cmd
	reports *json.Decoder
	r       *os.File
	pid     int
	kill    sync.Once
	hard    *time.Timer // SIGKILL if the supervisor outlives helperKillGrace
}

// helperKillGrace is how long a supervisor asked to stop may take to kill
// the sandbox, clean up and report before it is killed itself: then bwrap's
// --die-with-parent ends the sandbox, and the next rlm sweeps its cgroups.
const helperKillGrace = 10 * time.Second

// Pid is the sandbox's process group, as for an in-process sandbox, so
// program.Exec's group kill reaches the program, not the supervisor, which
// must live to clean up.
func (p *helperProcess) Pid() int { return p.pid }

// Kill asks the supervisor to kill the sandbox; it then cleans up and
// reports how the program ended.
func (p *helperProcess) Kill() {
	p.kill.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.hard = time.AfterFunc(helperKillGrace, func() { _ = p.cmd.Process.Kill() })
	})
}

// Wait implements program.Process.
func (p *helperProcess) Wait() (isolation.Exit, error) {
	var end isolation.Report
	derr := p.reports.Decode(&end)
	werr := p.cmd.Wait()
	p.kill.Do(func() {}) // no hard kill may start after this
	if p.hard != nil {
		p.hard.Stop()
	}
	proctree.Untrack(p.cmd.Process.Pid)
	p.r.Close()
	if derr != nil || end.Exit == nil {
		return isolation.Exit{Code: -1}, fmt.Errorf("sandbox supervisor ended without a report (%v)", errors.Join(derr, werr))
	}
	if end.Error != "" {
		return *end.Exit, errors.New(end.Error)
	}
	return *end.Exit, nil
}
