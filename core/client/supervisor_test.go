package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// The test binary doubles as a runtime plugin when started with
// RLM_SUPERVISOR_PLUGIN=1, so the supervisor under test launches, loses
// and relaunches real plugin processes.
func TestMain(m *testing.M) {
	if os.Getenv("RLM_SUPERVISOR_PLUGIN") == "1" {
		plugin.ServeGRPC(pidRuntime())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// pidRuntime's Run prints its process id for "pid"; for "die" it appends a
// line to $RLM_SUPERVISOR_MARK and exits, as a program that kills its own
// plugin makes it do; anything else it echoes.
func pidRuntime() *plugintest.Runtime {
	return &plugintest.Runtime{
		InfoF: func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
			return &pb.InfoResponse{Name: "pid", Available: true, Backend: "native", IsolationLevels: []string{"none"}}, nil
		},
		RunF: func(_ context.Context, req *pb.RunRequest) (*pb.Result, error) {
			switch code := string(req.GetCode()); code {
			case "pid":
				return &pb.Result{Stdout: []byte(strconv.Itoa(os.Getpid()))}, nil
			case "die":
				f, err := os.OpenFile(os.Getenv("RLM_SUPERVISOR_MARK"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err == nil {
					_, _ = f.WriteString("run\n")
					_ = f.Close()
				}
				// Time for the accepted header to leave, as it has for
				// any program that runs a moment.
				time.Sleep(200 * time.Millisecond)
				os.Exit(3)
				return nil, nil
			default:
				return &pb.Result{Stdout: req.GetCode()}, nil
			}
		},
	}
}

func run(ctx context.Context, sup *client.Supervisor, code string) (*core.Result, error) {
	return client.Call(ctx, sup, func(rt *client.Runtime) (*core.Result, error) {
		return rt.Run(ctx, core.Program{Code: code, Limits: core.Limits{Isolation: "none"}})
	})
}

// A supervisor launches its plugin once for many calls; a plugin killed
// while idle is launched again by the next call, which gets its answer; a
// program whose plugin died while running it ends crashed and is not run a
// second time.
func TestSupervisorRelaunchesALostPlugin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	mark := filepath.Join(t.TempDir(), "runs")
	plugintest.WritePlugin(t, dir, "pid", "RLM_SUPERVISOR_PLUGIN=1", "RLM_SUPERVISOR_MARK="+mark)
	var relaunches atomic.Int64
	var logged atomic.Int64
	sup := client.NewSupervisor(client.SupervisorConfig{
		Name: "pid",
		Open: func(ctx context.Context, name string) (*client.Runtime, error) {
			return client.Launch(ctx, []string{dir}, name, name, client.Native)
		},
		OnRelaunch: func(string) { relaunches.Add(1) },
		Log:        func(string) { logged.Add(1) },
	})
	defer sup.Close()

	pid := func() int {
		t.Helper()
		res, err := run(ctx, sup, "pid")
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(res.Stdout)
		if err != nil {
			t.Fatalf("pid: %q", res.Stdout)
		}
		return n
	}
	first := pid()
	for i := 0; i < 3; i++ {
		if p := pid(); p != first {
			t.Fatalf("call %d ran in process %d, want the first plugin %d", i, p, first)
		}
	}
	st := sup.Status()
	if st.Launches != 1 || st.Generation != 1 || !st.Running || !strings.HasSuffix(st.Plugin, pb.Prefix+"pid") {
		t.Fatalf("after four calls: %+v, want one launch, running, plugin named", st)
	}
	if info := sup.Declared(); info == nil || info.Name != "pid" {
		t.Fatalf("Declared: %+v, want the plugin's fingerprint", info)
	}

	// Killed while idle: the next call gets a fresh plugin and its answer.
	proc, err := os.FindProcess(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	second := pid()
	if second == first {
		t.Fatalf("the killed plugin %d answered", first)
	}
	st = sup.Status()
	if st.Launches != 2 || st.Generation != 2 || !st.Running || relaunches.Load() != 1 || logged.Load() != 1 {
		t.Fatalf("after the idle kill: %+v, %d relaunches, %d log lines; want 2 launches, 1 relaunch, 1 line",
			st, relaunches.Load(), logged.Load())
	}

	// Dies while running a program: crashed, run once, not relaunched for
	// it; the next call relaunches.
	res, err := run(ctx, sup, "die")
	if err != nil {
		t.Fatalf("a program whose plugin died is a result, not an error: %v", err)
	}
	if res.EndedBy != ending.Crashed || !strings.Contains(res.Error, core.PartlyRun) {
		t.Fatalf("the program whose plugin died: %+v", res)
	}
	if b, _ := os.ReadFile(mark); string(b) != "run\n" {
		t.Fatalf("the program whose plugin died ran %q, want once", b)
	}
	if st := sup.Status(); st.Launches != 2 {
		t.Fatalf("a crashed program relaunched its plugin at once: %+v", st)
	}
	if third := pid(); third == second || third == first {
		t.Fatalf("after the crash the call ran in the dead plugin %d", third)
	}
	if st := sup.Status(); st.Launches != 3 || st.Generation != 3 || relaunches.Load() != 2 {
		t.Fatalf("after the crash: %+v, %d relaunches", st, relaunches.Load())
	}

	// Closed: the plugin is killed and nothing is launched again.
	sup.Close()
	if st := sup.Status(); st.Running || st.Plugin != "" {
		t.Fatalf("after Close: %+v", st)
	}
	if _, err := run(ctx, sup, "pid"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("a call after Close: %v, want ErrClosed", err)
	}
}

// mockOpener opens in-process runtimes (core/plugin/plugintest) whose Info
// fails as a lost connection (Unavailable) while lose is set, and counts them.
func mockOpener(t *testing.T, opened *atomic.Int64, lose *atomic.Bool) client.Opener {
	return func(_ context.Context, name string) (*client.Runtime, error) {
		n := opened.Add(1)
		c, stop := plugintest.Connect(t, &plugintest.Runtime{InfoF: func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
			if lose.Load() {
				return nil, status.Error(codes.Unavailable, "gone")
			}
			return &pb.InfoResponse{Name: fmt.Sprint(n), Available: true}, nil
		}})
		return client.NewRuntime(name, "fake", c, stop, isolate.Available), nil
	}
}

// A runtime lost twice before a call reached it is a LostTwiceError; a
// call that fails otherwise is not repeated; launch errors are
// StartErrors; a stale generation's loss does not drop a newer runtime;
// an adopted runtime is the first generation; Close's error is the
// configured one.
func TestSupervisorCallAndGenerations(t *testing.T) {
	ctx := context.Background()
	var opened atomic.Int64
	var lose atomic.Bool
	closedErr := errors.New("shutting down")
	sup := client.NewSupervisor(client.SupervisorConfig{Name: "m", Open: mockOpener(t, &opened, &lose), Closed: closedErr})

	adopted, err := mockOpener(t, &opened, &lose)(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	sup.Adopt(adopted)
	if rt, gen, err := sup.Get(ctx); err != nil || rt != adopted || gen != 1 {
		t.Fatalf("Get after Adopt: %v %d %v", rt == adopted, gen, err)
	}
	if st := sup.Status(); st.Launches != 0 || st.Generation != 1 {
		t.Fatalf("an adopted runtime is not a launch: %+v", st)
	}
	if err := sup.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	// Lost(stale) leaves the runtime alone; Lost(current) drops it.
	sup.Lost(0)
	if _, gen, _ := sup.Get(ctx); gen != 1 {
		t.Fatalf("a stale Lost dropped the runtime: generation %d", gen)
	}
	sup.Lost(1)
	if _, gen, _ := sup.Get(ctx); gen != 2 || opened.Load() != 2 {
		t.Fatalf("after Lost(1): generation %d, %d opened", gen, opened.Load())
	}

	// Lost on every call: one relaunch, then LostTwiceError.
	lose.Store(true)
	_, err = client.Call(ctx, sup, func(rt *client.Runtime) (*core.Info, error) { return rt.Info(ctx) })
	var lt *client.LostTwiceError
	if !errors.As(err, &lt) || !errors.Is(err, core.ErrRuntimeLost) || !strings.Contains(err.Error(), "exited twice") {
		t.Fatalf("lost twice: %v", err)
	}
	if n := opened.Load(); n != 3 {
		t.Fatalf("%d opened, want 3 (one relaunch for the call)", n)
	}
	if err := sup.Ping(ctx); !errors.Is(err, core.ErrRuntimeLost) || errors.As(err, &lt) {
		t.Fatalf("Ping's error is the call's, unwrapped: %v", err)
	}
	lose.Store(false)

	// Another error is the call's, and not repeated.
	before := opened.Load()
	calls := 0
	boom := errors.New("boom")
	if _, err := client.Call(ctx, sup, func(*client.Runtime) (int, error) { calls++; return 0, boom }); err != boom || calls != 1 {
		t.Fatalf("a failed call: %v after %d calls", err, calls)
	}
	if opened.Load() != before+1 { // the runtime Ping left lost is launched once
		t.Fatalf("%d opened, want %d", opened.Load(), before+1)
	}

	sup.Close()
	if _, _, err := sup.Get(ctx); err != closedErr {
		t.Fatalf("Get after Close: %v", err)
	}
	var se *client.StartError
	if _, err := client.Call(ctx, sup, func(*client.Runtime) (int, error) { return 0, nil }); !errors.As(err, &se) || !errors.Is(err, closedErr) {
		t.Fatalf("Call after Close: %v, want a StartError wrapping the closed error", err)
	}
}
