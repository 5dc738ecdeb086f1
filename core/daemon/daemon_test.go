package daemon

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/testutil"
)

type running struct {
	srv    *Server
	socket string
	log    *testutil.SyncBuffer
	done   chan error
}

// startDaemon serves a daemon with the fake runtime pooled, on a socket in
// a temporary directory, and stops it when the test ends.
func startDaemon(t *testing.T, workers int) *running {
	t.Helper()
	dir := t.TempDir()
	writeFakePlugin(t, dir)
	return serveIn(t, dir, workers, "fake")
}

// serveIn serves a daemon on dir/d.sock with plugins from dir and runtime
// pooled, and stops it when the test ends.
func serveIn(t *testing.T, dir string, workers int, runtime string) *running {
	t.Helper()
	r := &running{socket: filepath.Join(dir, "d.sock"), log: &testutil.SyncBuffer{}, done: make(chan error, 1)}
	r.srv = New(Config{
		Socket: r.socket, Workers: workers, Runtimes: []string{runtime},
		Plugins: launch.SearchPath{dir}, MaxOutputBytes: 1 << 20, Drain: 2 * time.Second, Log: r.log,
	})
	ready := make(chan struct{})
	go func() { r.done <- r.srv.Serve(context.Background(), func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-r.done:
		t.Fatalf("daemon did not start: %v\n%s", err, r.log)
	case <-time.After(30 * time.Second):
		t.Fatalf("daemon not ready\n%s", r.log)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	r.srv.Stop()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("daemon did not stop\n%s", r.log)
	}
	r.done <- nil // later stops return at once
}

func dialFake(t *testing.T, r *running) *client.Runtime {
	t.Helper()
	rt, err := Dial(context.Background(), r.socket, "fake")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

func fakeStatus(t *testing.T, r *running) RuntimeStatus {
	t.Helper()
	st, err := GetStatus(context.Background(), r.socket)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range st.Runtimes {
		if rs.Name == "fake" {
			return rs
		}
	}
	t.Fatalf("no fake runtime in status %+v", st)
	return RuntimeStatus{}
}

// waitFor polls the daemon's status until cond holds.
func waitFor(t *testing.T, r *running, what string, cond func(RuntimeStatus) bool) RuntimeStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs := fakeStatus(t, r)
		if cond(rs) {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened; status %+v workers %+v", what, rs, rs.Workers)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSessionsFromThePoolNeverShareState(t *testing.T) {
	r := startDaemon(t, 2)
	rt := dialFake(t, r)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		s, err := rt.OpenSession(ctx, core.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, found, err := s.Variable(ctx, "secret"); err != nil || found {
			t.Fatalf("session %d sees a variable set by an earlier client (found=%v, err=%v)", i, found, err)
		}
		res, err := s.Execute(ctx, "set secret abc", 0)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("execute: %v %+v", err, res)
		}
		if res.Backend != BackendName {
			t.Errorf("cell backend %q, want daemon", res.Backend)
		}
		if v, found, err := s.Variable(ctx, "secret"); err != nil || !found || string(v) != `"abc"` {
			t.Fatalf("variable: %s %v %v", v, found, err)
		}
		s.Close()
	}
	rs := waitFor(t, r, "pool refilled", func(rs RuntimeStatus) bool { return rs.Workers.Idle == 2 && rs.Workers.Busy == 0 })
	if rs.Sessions != 3 || rs.WarmSessions != 3 || rs.Workers.Served != 3 {
		t.Fatalf("want 3 sessions, all warm; got %+v workers %+v", rs, rs.Workers)
	}
}

func TestSessionWithContextIsOpenedForTheClient(t *testing.T) {
	r := startDaemon(t, 1)
	rt := dialFake(t, r)
	ctx := context.Background()
	s, err := rt.OpenSession(ctx, core.SessionOptions{Context: &core.Context{Data: []byte("the doc")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, found, err := s.Variable(ctx, "context")
	if err != nil || !found || string(v) != `"the doc"` {
		t.Fatalf("context: %s %v %v", v, found, err)
	}
	rs := fakeStatus(t, r)
	if rs.Sessions != 1 || rs.WarmSessions != 0 {
		t.Fatalf("a session with a context must not come from the pool: %+v", rs)
	}
}

func TestWallLimitReachesWarmCells(t *testing.T) {
	r := startDaemon(t, 1)
	rt := dialFake(t, r)
	ctx := context.Background()
	s, err := rt.OpenSession(ctx, core.SessionOptions{Limits: core.Limits{Wall: 1500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Execute(ctx, "timeout", 0)
	if err != nil || res.Stdout != "1500" {
		t.Fatalf("cell saw timeout %q (%v), want the session's 1500 ms", res.Stdout, err)
	}
	res, err = s.Execute(ctx, "timeout", 250*time.Millisecond)
	if err != nil || res.Stdout != "250" {
		t.Fatalf("cell saw timeout %q (%v), want its own 250 ms", res.Stdout, err)
	}
}

func TestCallbacksReachTheClientThatOwnsTheSession(t *testing.T) {
	r := startDaemon(t, 2)
	rt := dialFake(t, r)
	ctx := context.Background()
	open := func(name string) core.Session {
		s, err := rt.OpenSession(ctx, core.SessionOptions{Bridges: core.Bridges{
			LLMQuery: func(_ context.Context, prompt, _ string) (string, error) { return name + " answers " + prompt, nil },
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open("A"), open("B")
	for _, c := range []struct {
		s    core.Session
		want string
	}{{a, "A answers q1"}, {b, "B answers q1"}, {a, "A answers q1"}} {
		res, err := c.s.Execute(ctx, "llm q1", 0)
		if err != nil || res.Stdout != c.want {
			t.Fatalf("got %q (%v), want %q", res.Stdout, err, c.want)
		}
	}
	noLLM, err := rt.OpenSession(ctx, core.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer noLLM.Close()
	res, err := noLLM.Execute(ctx, "llm q", 0)
	if err != nil || !strings.Contains(res.Error, "no LLM configured") {
		t.Fatalf("a session without bridges: %+v %v", res, err)
	}
}

func TestWorkerDeathIsAnErrorNotAHang(t *testing.T) {
	r := startDaemon(t, 1)
	rt := dialFake(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := rt.OpenSession(ctx, core.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Execute(ctx, "crash", 0); err == nil || ctx.Err() != nil {
		t.Fatalf("execute on a dying worker: err=%v ctx=%v", err, ctx.Err())
	}
	if _, err := s.Execute(ctx, "echo again", 0); err == nil {
		t.Fatal("a session whose worker died still runs cells")
	}
	waitFor(t, r, "lost worker counted", func(rs RuntimeStatus) bool { return rs.WorkersLost == 1 })
	// The daemon still serves others.
	s2, err := rt.OpenSession(ctx, core.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if res, err := s2.Execute(ctx, "echo ok", 0); err != nil || res.Stdout != "ok" {
		t.Fatalf("after a crash: %+v %v", res, err)
	}
}

func TestClientThatDisappearsMidCellHasItsWorkerKilled(t *testing.T) {
	r := startDaemon(t, 1)
	rt, err := Dial(context.Background(), r.socket, "fake")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := rt.OpenSession(ctx, core.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go s.Execute(ctx, "block", 0)
	waitFor(t, r, "pool refilled behind the busy worker", func(rs RuntimeStatus) bool { return rs.Workers.Busy == 1 && rs.Workers.Idle == 1 })
	rt.Close() // the connection drops, as when the client process is killed
	waitFor(t, r, "worker released", func(rs RuntimeStatus) bool { return rs.Workers.Busy == 0 })

	// The plugin holds exactly the idle worker's session: the busy one was
	// killed, not returned.
	rt2 := dialFake(t, r)
	s2, err := rt2.OpenSession(ctx, core.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// live counts this session plus the refilled idle one.
		res, err := s2.Execute(ctx, "live", 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin still holds %s sessions, want 2 (this one and one warm)", res.Stdout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIdleWorkersThatDieAreReplaced(t *testing.T) {
	r := startDaemon(t, 2)
	poison := filepath.Join(filepath.Dir(r.socket), "poison")
	if err := os.WriteFile(poison, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, "idle workers found dead", func(rs RuntimeStatus) bool { return rs.Workers.Crashed >= 2 })
	os.Remove(poison)
	waitFor(t, r, "pool refilled", func(rs RuntimeStatus) bool { return rs.Workers.Idle == 2 })
	rt := dialFake(t, r)
	s, err := rt.OpenSession(context.Background(), core.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res, err := s.Execute(context.Background(), "echo fresh", 0); err != nil || res.Stdout != "fresh" {
		t.Fatalf("a replacement worker: %+v %v", res, err)
	}
}

func TestRunServedAsWarmCellOrProxied(t *testing.T) {
	r := startDaemon(t, 1)
	rt := dialFake(t, r)
	ctx := context.Background()
	res, err := rt.Run(ctx, core.Program{Code: "exit 3"})
	if err != nil || res.ExitCode != 3 || res.Backend != BackendName {
		t.Fatalf("warm run: %+v %v", res, err)
	}
	res, err = rt.Run(ctx, core.Program{Code: "echo x", Args: []string{"a"}})
	if err != nil || res.Stdout != "run:echo x" || res.Backend != BackendName {
		t.Fatalf("run with args must go to the plugin's Run: %+v %v", res, err)
	}
	res, err = rt.Run(ctx, core.Program{Code: "echo x", Limits: core.Limits{MemoryBytes: 1 << 30}})
	if err != nil || res.Stdout != "run:echo x" {
		t.Fatalf("run with a memory limit the pool lacks must go to the plugin's Run: %+v %v", res, err)
	}
	rs := fakeStatus(t, r)
	if rs.Runs != 3 || rs.WarmRuns != 1 {
		t.Fatalf("runs %d warm %d, want 3 and 1", rs.Runs, rs.WarmRuns)
	}
	// Non-pooled runtimes and Check are proxied too.
	if ok, _, err := rt.Check(ctx, "f("); err != nil || ok {
		t.Fatalf("check: %v %v", ok, err)
	}
	info, err := rt.Info(ctx)
	if err != nil || info.RuntimeVersion != "Fake 1.0" || info.Backend != BackendName {
		t.Fatalf("info: %v %v", info, err)
	}
}

// The plugin that serves proxied runs is kept (client.Supervisor): killed
// while idle, it is launched again for the next run, which gets its
// answer; a program whose plugin dies while running it ends crashed and is
// not run again.
func TestRunPluginRelaunchedAfterDeath(t *testing.T) {
	r := startDaemon(t, 0)
	rt := dialFake(t, r)
	ctx := context.Background()
	pid := func() int {
		t.Helper()
		res, err := rt.Run(ctx, core.Program{Code: "pid"})
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(res.Stdout)
		if err != nil {
			t.Fatalf("pid: %+v", res)
		}
		return n
	}
	first := pid()
	if p := pid(); p != first {
		t.Fatalf("second run in process %d, want the first plugin %d", p, first)
	}
	starts := fakeStatus(t, r).PluginStarts
	proc, err := os.FindProcess(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	if p := pid(); p == first {
		t.Fatalf("the killed plugin %d answered", first)
	}
	if rs := fakeStatus(t, r); rs.PluginStarts != starts+1 || !rs.PluginRunning {
		t.Fatalf("after the kill: %d starts (was %d), running %v", rs.PluginStarts, starts, rs.PluginRunning)
	}
	// Status names the build serving: the binary's modification time and
	// size as it was launched.
	rs := fakeStatus(t, r)
	fi, err := os.Stat(rs.PluginPath)
	if err != nil {
		t.Fatalf("plugin path %q: %v", rs.PluginPath, err)
	}
	if rs.PluginModified == nil || !rs.PluginModified.Equal(fi.ModTime()) || rs.PluginSize != fi.Size() {
		t.Fatalf("status of the running plugin: %+v (binary modified %v, %d bytes)", rs, fi.ModTime(), fi.Size())
	}
	res, err := rt.Run(ctx, core.Program{Code: "die"})
	if err != nil || res.EndedBy != ending.Crashed || !strings.Contains(res.Error, core.PartlyRun) || res.Backend != BackendName {
		t.Fatalf("the run whose plugin died: %+v %v", res, err)
	}
	if rs := fakeStatus(t, r); rs.PluginStarts != starts+1 {
		t.Fatalf("a crashed run was retried: %d starts, want %d", rs.PluginStarts, starts+1)
	}
	pid()
	if rs := fakeStatus(t, r); rs.PluginStarts != starts+2 {
		t.Fatalf("after the crash: %d starts, want %d", rs.PluginStarts, starts+2)
	}
}

func TestUnknownRuntimeIsAClearError(t *testing.T) {
	r := startDaemon(t, 0)
	rt, err := Dial(context.Background(), r.socket, "cobol")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	_, err = rt.Run(context.Background(), core.Program{Code: "x"})
	if err == nil || !strings.Contains(err.Error(), "rlm-plugin-cobol") {
		t.Fatalf("got %v", err)
	}
}

func TestSecondDaemonOnTheSamePathsRefuses(t *testing.T) {
	r := startDaemon(t, 0)
	second := New(Config{Socket: r.socket, Plugins: launch.SearchPath{}})
	err := second.Serve(context.Background(), nil)
	var ar *AlreadyRunningError
	if !errors.As(err, &ar) || ar.PID != os.Getpid() {
		t.Fatalf("second daemon: %v", err)
	}
	if !strings.Contains(err.Error(), "already running (pid ") {
		t.Fatalf("message: %v", err)
	}
	if !Alive(context.Background(), r.socket) {
		t.Fatal("the first daemon stopped answering")
	}
}

func TestStaleSocketIsReplacedAndStopCleansUp(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // a crashed daemon leaves its socket behind
	if _, err := os.Stat(sock); err != nil {
		t.Fatal(err)
	}
	if Alive(context.Background(), sock) {
		t.Fatal("a stale socket answers")
	}
	if _, err := Dial(context.Background(), sock, "python"); err == nil || !strings.Contains(err.Error(), "rlm daemon start") {
		t.Fatalf("dial with no daemon: %v", err)
	}
	log := &testutil.SyncBuffer{}
	srv := New(Config{Socket: sock, Log: log})
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- srv.Serve(context.Background(), func() { close(ready) }) }()
	<-ready
	if !Alive(context.Background(), sock) {
		t.Fatal("daemon on a formerly stale socket does not answer")
	}
	if !strings.Contains(log.String(), "stale socket") {
		t.Errorf("log does not mention the stale socket:\n%s", log)
	}
	st, err := os.Stat(sock)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", st, err)
	}
	pid, err := StopAndWait(context.Background(), sock, 10*time.Second)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("stop: pid %d, %v", pid, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sock, PathsFor(sock).PID} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind after stop (%v)", p, err)
		}
	}
}

func TestPathsSitBesideTheSocket(t *testing.T) {
	p := PathsFor("/run/x/my.sock")
	if p.PID != "/run/x/my.pid" || p.Log != "/run/x/my.log" {
		t.Fatalf("%+v", p)
	}
	home, _ := os.UserHomeDir()
	if d := PathsFor(""); d.Socket != filepath.Join(home, ".rlm", "daemon.sock") || d.PID != filepath.Join(home, ".rlm", "daemon.pid") {
		t.Fatalf("default %+v", d)
	}
}

// A program whose warm worker dies under it may have partly run: it ends
// crashed and is not run again (a second run would repeat its effects).
func TestWarmRunWhoseWorkerDiesIsCrashedNotRetried(t *testing.T) {
	r := startDaemon(t, 1)
	rt := dialFake(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := rt.Run(ctx, core.Program{Code: "crash"})
	if err != nil || res.EndedBy != "crashed" || res.ExitCode != -1 || !strings.Contains(res.Error, core.PartlyRun) {
		t.Fatalf("run on a dying worker: %+v %v", res, err)
	}
	waitFor(t, r, "lost worker counted", func(rs RuntimeStatus) bool { return rs.WorkersLost == 1 })
	if rs := fakeStatus(t, r); rs.Runs != 1 {
		t.Fatalf("runs %d, want 1: the program was run again", rs.Runs)
	}
	res, err = rt.Run(ctx, core.Program{Code: "exit 3"})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("after a crash: %+v %v", res, err)
	}
}
