package program

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
)

// lateSpawner's process writes its output at the last moment: while Wait
// runs, just before it returns, as a fork server's child does when the
// server's report of its exit comes at once. Its pid is a real process of
// a group of its own (a sleep), since Exec kills the group.
type lateSpawner struct{ out string }

type lateProcess struct {
	cmd    *exec.Cmd
	stdout *os.File
	out    string
}

func (s lateSpawner) Spawn(argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (Process, error) {
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	fd, err := syscall.Dup(int(stdout.Fd()))
	if err != nil {
		return nil, err
	}
	return &lateProcess{cmd: cmd, stdout: os.NewFile(uintptr(fd), "late-stdout"), out: s.out}, nil
}

func (p *lateProcess) Pid() int { return p.cmd.Process.Pid }

func (p *lateProcess) Wait() (isolation.Exit, error) {
	_, _ = p.stdout.WriteString(p.out)
	p.stdout.Close()
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	return isolation.Exit{}, nil
}

// TestOutputWrittenAsTheRunEndsIsKept: once the grace for escaped writers
// is over, what the pipes already hold is still the run's output. On a
// loaded machine the drain may not have run at all when Wait returns, and
// the grace's end used to close the pipes unread: the run answered success
// with an empty stdout. A zero grace makes that the common case here.
func TestOutputWrittenAsTheRunEndsIsKept(t *testing.T) {
	defer func(g time.Duration) { drainGrace = g }(drainGrace)
	drainGrace = 0
	for i := 0; i < 200; i++ {
		res, err := Exec(context.Background(), Command{Argv: []string{"late"}, Env: BaseEnv(t.TempDir()), Spawner: lateSpawner{out: "1\n"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "1\n" {
			t.Fatalf("run %d: stdout %q, want %q: output in the pipe was dropped", i, res.Stdout, "1\n")
		}
	}
}

// TestEscapedWritersEndTheDrain: a writer that left the group (setsid)
// holds the pipes open, idle or flooding; the run still ends once the
// grace is over, with the output the program wrote.
func TestEscapedWritersEndTheDrain(t *testing.T) {
	for _, bg := range []string{"sleep 300", "while :; do echo x; done"} {
		dir := t.TempDir()
		mark, goOn := filepath.Join(dir, "escaped"), filepath.Join(dir, "go")
		// The writer says its pid once it has a session of its own (the
		// group kill would still reach it before), and writes only once
		// the program has printed.
		writer := "echo $$ >" + mark + ".tmp; mv " + mark + ".tmp " + mark + "; while [ ! -e " + goOn + " ]; do sleep 0.01; done; " + bg
		script := "setsid sh -c '" + writer + "' & while [ ! -e " + mark + " ]; do sleep 0.01; done; echo done; touch " + goOn
		start := time.Now()
		r := bash(t, script, core.Limits{Wall: 60 * time.Second})
		if b, err := os.ReadFile(mark); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL) // Exec leaves escaped writers to the plugin's reaper
			}
		}
		if !strings.HasPrefix(r.Stdout, "done\n") || r.EndedBy != ending.Exit {
			t.Fatalf("%s: %.300q (ended by %s)", bg, r.Stdout, r.EndedBy)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("%s: took %v: waited for the escaped writer", bg, d)
		}
	}
}
