package native

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

// stagingSandbox is a Sandbox and Stager whose staged spawner never gets a
// sandbox (program.ErrNotStarted) and whose host spawner runs on the host.
type stagingSandbox struct {
	staged, host int
	stagedRuns   []SandboxRun
}

func (*stagingSandbox) Levels() []isolation.Level {
	return []isolation.Level{isolation.None, isolation.Namespace}
}
func (*stagingSandbox) Available(isolation.Level) error { return nil }
func (s *stagingSandbox) Spawner(context.Context, SandboxRun) program.Spawner {
	s.host++
	return program.ExecSpawner{}
}
func (*stagingSandbox) StagedDir() string { return "/staged" }
func (s *stagingSandbox) StagedSpawner(_ context.Context, r SandboxRun, ws *program.Workspace) program.Spawner {
	s.stagedRuns = append(s.stagedRuns, r)
	return spawnerFunc(func() error {
		s.staged++
		if name, code := ws.Code(); name != "main.sh" || string(code) != "echo ran in $PWD" || ws.Dir != "/staged" {
			return fmt.Errorf("staged workspace %s %q in %s", name, code, ws.Dir)
		}
		return fmt.Errorf("%w: no sandbox", program.ErrNotStarted)
	})
}

type spawnerFunc func() error

func (f spawnerFunc) Spawn([]string, string, []string, *os.File, *os.File, *os.File) (program.Process, error) {
	return nil, f()
}

// TestStagedRunsFallBackToTheHost: a run that needs nothing of the host
// is offered to the Stager first; when its sandbox cannot be had
// (ErrNotStarted) the run goes to a host workspace, once, and a run with
// files of its own never goes to the Stager at all.
func TestStagedRunsFallBackToTheHost(t *testing.T) {
	sb := &stagingSandbox{}
	rt := &Runtime{Name: "sh", Tool: "sh", CodeFile: "main.sh", Sandbox: sb, Probe: func(path string) (toolpath.Tool, error) {
		return toolpath.Tool{Exe: path, Version: "sh"}, nil
	}}
	s := New(rt)
	if _, err := s.Tool(); err != nil {
		t.Skipf("sh unavailable: %v", err)
	}
	lim := core.Limits{Isolation: "namespace"}
	res, err := s.Run(context.Background(), core.Program{Code: "echo ran in $PWD", Limits: lim, ReturnFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Stdout, "ran in /") || strings.Contains(res.Stdout, "/staged") || sb.staged != 1 || sb.host != 1 {
		t.Fatalf("%q: %d staged attempts, %d host runs; want the host's run after one staged attempt", res.Stdout, sb.staged, sb.host)
	}
	if r := sb.stagedRuns[0]; !r.Shared || !r.ReturnFiles || r.Spec.Level != isolation.Namespace {
		t.Fatalf("the Stager was told %+v", r)
	}
	_, err = s.Run(context.Background(), core.Program{Code: "echo ran in $PWD", Limits: lim, Files: []core.File{{Path: "in.txt", Data: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.staged != 1 || sb.host != 2 {
		t.Fatalf("a run with files: %d staged attempts, %d host runs", sb.staged, sb.host)
	}
}
