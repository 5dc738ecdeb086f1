package native

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rlmkit/rlm/core/isolate"
	"github.com/rlmkit/rlm/core/program"
	pb "github.com/rlmkit/rlm/core/proto"
	"github.com/rlmkit/rlm/core/toolpath"
)

// isolatedSpawner starts programs through core/isolate. It is what every
// native runtime's program mode uses unless the request asks for no
// isolation, so the python fork server (which would hand the program an
// unconstrained interpreter) is only ever used at level none.
type isolatedSpawner struct {
	ctx    context.Context
	level  isolate.Level
	limits *pb.Limits
	ro     []string
}

// Spawn implements program.Spawner.
func (s *isolatedSpawner) Spawn(argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (program.Process, error) {
	l := s.limits
	spec := isolate.Spec{
		Level:         s.level,
		Argv:          argv,
		Env:           env,
		Dir:           dir,
		ReadOnlyPaths: s.ro,
		MemoryBytes:   l.GetMemoryBytes(),
		MaxProcesses:  l.GetMaxProcesses(),
		CPUSeconds:    (l.GetCpuMs() + 999) / 1000,
		DiskBytes:     l.GetMaxDiskBytes(),
		// One file can never be larger than the whole directory; without a
		// tmpfs (level process as non-root is refused DiskBytes) this is
		// also what keeps a single huge file from filling the host disk.
		FileSizeBytes: l.GetMaxDiskBytes(),
		AllowNetwork:  l.GetAllowNetwork(),
	}
	cmd, err := isolate.Command(s.ctx, spec)
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		_ = cmd.Cleanup()
		return nil, err
	}
	return &isolatedProcess{cmd: cmd, level: s.level}, nil
}

type isolatedProcess struct {
	cmd   *isolate.Cmd
	level isolate.Level
}

func (p *isolatedProcess) Pid() int { return p.cmd.Pid() }

func (p *isolatedProcess) Kill() { _ = p.cmd.Kill() }

func (p *isolatedProcess) Wait() (program.Exit, error) {
	err := p.cmd.Wait()
	o := p.cmd.Outcome()
	ex := program.Exit{
		Code:            o.ExitCode,
		PeakMemoryBytes: o.PeakMemoryBytes,
		Isolation:       string(p.level),
		EndedBy:         o.Ending,
	}
	if o.Signal != "" {
		ex.Signal = syscall.Signal(o.SignalNumber)
		ex.Code = 0
	}
	return ex, err
}

// ReadOnlyPaths is what a namespace sandbox must show of the host for the
// runtime to start: the installation prefix of an interpreter kept outside
// /usr (pyenv under /root, a Go toolchain in /usr/local/go), plus extra
// files and directories the run needs (installed requirements, the context
// file, a compiled binary).
func ReadOnlyPaths(t toolpath.Tool, extra ...string) []string {
	var out []string
	add := func(p string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		if p == "/usr" || strings.HasPrefix(p, "/usr/") || p == "/bin" || p == "/lib" || p == "/sbin" {
			return // always visible
		}
		for _, have := range out {
			if p == have || strings.HasPrefix(p, have+"/") {
				return
			}
		}
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	add(t.Extra["prefix"])
	add(t.Extra["goroot"])
	if real, err := filepath.EvalSymlinks(t.Exe); err == nil {
		// <prefix>/bin/<exe>: the prefix holds the interpreter's libraries.
		add(filepath.Dir(filepath.Dir(real)))
	}
	for _, p := range extra {
		add(p)
	}
	return out
}
