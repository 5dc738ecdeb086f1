// Package forkserver keeps one warm Python interpreter that forks a fresh
// child for each program, so that a run costs a fork (about a millisecond)
// instead of an interpreter start (about 30). It is a program.Spawner.
//
// # Notes
//
//   - Each child starts from the server's state: only the few small modules
//     the server imports are already loaded, and the interpreter's string
//     hash seed is the server's, shared by every child (PYTHONHASHSEED
//     semantics differ from a fresh `python3 main.py` in that one respect).
//   - The child runs the file as __main__ with sys.argv, sys.path[0], the
//     environment, the working directory and its standard files set as a
//     fresh interpreter would; uncaught exceptions print a traceback and
//     exit 1, SystemExit works as usual, atexit handlers and non-daemon
//     threads are honoured.
//   - The server is the parent of every child and reaps them; it reports
//     each exit status on the socket.
package forkserver

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/internal/calls"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
	"github.com/rlmkit/rlm/plugins/internal/warm"
)

//go:embed zygote.py
var zygote []byte

// Server is a running fork server.
type Server struct {
	cmd  *exec.Cmd
	conn *net.UnixConn
	dir  string

	sendMu sync.Mutex
	starts calls.Table[int] // spawn requests waiting for their pid; failed when the server is gone
	mu     sync.Mutex
	exits  map[int]chan syscall.WaitStatus // pid → status
	early  map[int]syscall.WaitStatus      // exits seen before a waiter
	done   chan struct{}
}

// Start launches the fork server with python (the real interpreter) and env
// (its base environment).
func Start(python string, env []string) (*Server, error) {
	dir := os.TempDir()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "forkserver"), os.NewFile(uintptr(fds[1]), "zygote")
	defer theirs.Close()
	source, err := warm.ForkServerSource(warm.PythonMain() + string(zygote))
	if err != nil {
		mine.Close()
		return nil, err
	}
	defer source.Close()
	argv := warm.ForkServerArgv(python)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.ExtraFiles = []*os.File{theirs, source} // fds 3 and warm.ForkServerSourceFD
	cmd.Stderr = os.Stderr
	proctree.Configure(cmd)
	if err := proctree.Start(cmd); err != nil {
		mine.Close()
		return nil, err
	}
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		proctree.KillGroup(cmd.Process.Pid)
		return nil, err
	}
	s := &Server{
		cmd: cmd, conn: fc.(*net.UnixConn), dir: dir,
		exits: map[int]chan syscall.WaitStatus{},
		early: map[int]syscall.WaitStatus{}, done: make(chan struct{}),
	}
	ready := make(chan error, 1)
	go s.read(ready)
	if err := <-ready; err != nil {
		s.Close()
		return nil, fmt.Errorf("python fork server did not start: %w", err)
	}
	return s, nil
}

type message struct {
	Ready  bool `json:"ready"`
	ID     int  `json:"id"`
	Pid    int  `json:"pid"`
	Status *int `json:"status"`
}

func (s *Server) read(ready chan<- error) {
	defer close(s.done)
	buf := make([]byte, 4096)
	first := true
	for {
		n, _, _, _, err := s.conn.ReadMsgUnix(buf, nil)
		if err == nil && n == 0 {
			err = errors.New("fork server exited")
		}
		if err != nil {
			if first {
				ready <- err
			}
			s.fail(err)
			return
		}
		var m message
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			continue
		}
		s.mu.Lock()
		switch {
		case m.Ready && first:
			first = false
			ready <- nil
		case m.Status != nil:
			ws := syscall.WaitStatus(*m.Status)
			if ch, ok := s.exits[m.Pid]; ok {
				// Wait removes the entry once it has the status: removing
				// it here would lose an exit that comes before Wait looks.
				ch <- ws
			} else {
				s.early[m.Pid] = ws
			}
		case m.ID != 0:
			// Register the exit waiter before reading on: the exit
			// message for this pid can only come after this one. (A
			// start nobody waits for any more leaves its entry until
			// the server goes.)
			s.exits[m.Pid] = make(chan syscall.WaitStatus, 1)
			s.starts.Answer(uint64(m.ID), m.Pid)
		}
		s.mu.Unlock()
	}
}

func (s *Server) fail(err error) {
	s.starts.Fail(err)
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, ch := range s.exits {
		close(ch)
		delete(s.exits, pid)
	}
}

// Alive reports whether the server can still spawn.
func (s *Server) Alive() bool { return s.starts.Err() == nil }

// Spawn forks a child running argv[1] (argv[0], the interpreter, is
// implied) with the given files. It implements program.Spawner.
func (s *Server) Spawn(argv []string, dir string, env []string, stdin, stdout, stderr *os.File) (program.Process, error) {
	if len(argv) < 2 {
		return nil, errors.New("forkserver: argv needs the interpreter and the script")
	}
	envMap := map[string]string{}
	for _, kv := range env {
		if k, v, ok := cut(kv); ok {
			envMap[k] = v
		}
	}
	id, ch, err := s.starts.Start()
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(map[string]any{"id": id, "argv": argv[1:], "dir": dir, "env": envMap})
	s.sendMu.Lock()
	_, _, err = s.conn.WriteMsgUnix(b, syscall.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd())), nil)
	s.sendMu.Unlock()
	if err != nil {
		s.starts.Drop(id)
		return nil, fmt.Errorf("forkserver: %w", err)
	}
	pid, ok := <-ch
	if !ok {
		return nil, errors.New("forkserver: the fork server died")
	}
	return &process{s: s, pid: pid}, nil
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], i > 0
		}
	}
	return "", "", false
}

type process struct {
	s   *Server
	pid int
}

func (p *process) Pid() int { return p.pid }

func (p *process) Wait() (isolation.Exit, error) {
	p.s.mu.Lock()
	if ws, ok := p.s.early[p.pid]; ok {
		delete(p.s.early, p.pid)
		p.s.mu.Unlock()
		return toExit(ws), nil
	}
	ch := p.s.exits[p.pid]
	p.s.mu.Unlock()
	if ch == nil {
		return isolation.Exit{Code: -1}, errors.New("forkserver: unknown child")
	}
	ws, ok := <-ch
	if ok {
		p.s.mu.Lock()
		if p.s.exits[p.pid] == ch {
			delete(p.s.exits, p.pid)
		}
		p.s.mu.Unlock()
	}
	if !ok {
		// The server died: the child, in its own group, is killed by
		// the caller's group kill; report it as killed.
		proctree.KillGroup(p.pid)
		return isolation.Exit{Signal: syscall.SIGKILL}, errors.New("the python fork server died during the run")
	}
	return toExit(ws), nil
}

func toExit(ws syscall.WaitStatus) isolation.Exit {
	if ws.Signaled() {
		return isolation.Exit{Signal: ws.Signal()}
	}
	return isolation.Exit{Code: ws.ExitStatus()}
}

// Close stops the server; children still running are the caller's to kill.
func (s *Server) Close() {
	s.conn.Close()
	proctree.KillGroup(s.cmd.Process.Pid)
	_ = s.cmd.Wait()
	proctree.Untrack(s.cmd.Process.Pid)
	<-s.done
}
