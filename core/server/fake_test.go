package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// fakeRuntime is an in-process runtime service with a tiny line language,
// so the handler's plumbing (limits, cancellation, sessions, callbacks) is
// tested without an interpreter:
//
//	echo TEXT        write TEXT and a newline to stdout
//	sleep MS         wait MS milliseconds (ends early when cancelled)
//	exit N           stop with status N
//	write NAME TEXT  create NAME in the working directory (Run only)
//	set NAME JSON    define a session variable
//	llm PROMPT       call llm_query; print the answer or fail with its error
//	cat NAME         print a file a cell brought (sessions only)
//	value TEXT       end the cell with result TEXT (sessions only)
//
// A session cell's files are kept by name; a name starting with "bad" is
// refused as a runtime refuses a path through a symlink.
type fakeRuntime struct {
	name      string
	runs      atomic.Int64
	cancelled atomic.Int64
	// started receives one value per Run that began.
	started chan struct{}
}

func (f *fakeRuntime) info(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
	return &pb.InfoResponse{Name: f.name, Available: true, RuntimeVersion: "Fake 1.0", Capabilities: []string{"program", "repl"}}, nil
}

type fakeOut struct {
	stdout  strings.Builder
	files   []*pb.File
	exit    int32
	endedBy pb.EndedBy
	err     string
	value   *string
}

func (f *fakeRuntime) interpret(ctx context.Context, code string, vars map[string]string, llm func(string) (string, error), wall time.Duration) *fakeOut {
	return f.interpretIn(ctx, code, vars, nil, llm, wall)
}

// interpretIn runs code with a session's files (nil for a program).
func (f *fakeRuntime) interpretIn(ctx context.Context, code string, vars map[string]string, files map[string][]byte, llm func(string) (string, error), wall time.Duration) *fakeOut {
	out := &fakeOut{endedBy: pb.EndedBy_EXIT}
	deadline := time.Now().Add(wall)
	for _, line := range strings.Split(code, "\n") {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch cmd {
		case "echo":
			out.stdout.WriteString(arg + "\n")
		case "sleep":
			ms, _ := strconv.Atoi(arg)
			t := time.NewTimer(time.Duration(ms) * time.Millisecond)
			limit := time.NewTimer(time.Until(deadline))
			select {
			case <-t.C:
			case <-limit.C:
				out.endedBy, out.exit, out.err = pb.EndedBy_TIMEOUT, 137, "timed out"
				return out
			case <-ctx.Done():
				f.cancelled.Add(1)
				out.endedBy, out.exit, out.err = pb.EndedBy_CANCELLED, 137, "cancelled"
				return out
			}
			t.Stop()
			limit.Stop()
		case "exit":
			n, _ := strconv.Atoi(arg)
			out.exit = int32(n)
			return out
		case "write":
			name, text, _ := strings.Cut(arg, " ")
			out.files = append(out.files, &pb.File{Path: name, Data: []byte(text), Size: int64(len(text)), Change: "created"})
		case "set":
			name, js, _ := strings.Cut(arg, " ")
			vars[name] = js
		case "cat":
			data, ok := files[arg]
			if !ok {
				out.err, out.exit = fmt.Sprintf("FileNotFoundError: %q", arg), 1
				return out
			}
			out.stdout.Write(data)
			out.stdout.WriteString("\n")
		case "value":
			v := arg
			out.value = &v
		case "llm":
			ans, err := llm(arg)
			if err != nil {
				out.err = "RuntimeError: " + err.Error()
				return out
			}
			out.stdout.WriteString(ans + "\n")
		case "":
		default:
			out.err = fmt.Sprintf("NameError: %q", cmd)
			out.exit = 1
			return out
		}
	}
	return out
}

func (o *fakeOut) result() *pb.Result {
	return &pb.Result{Stdout: []byte(o.stdout.String()), ExitCode: o.exit, EndedBy: o.endedBy, Error: o.err, Files: o.files, DurationMs: 1, Value: o.value}
}

func (f *fakeRuntime) run(ctx context.Context, req *pb.RunRequest) (*pb.Result, error) {
	f.runs.Add(1)
	if f.started != nil {
		select {
		case f.started <- struct{}{}:
		default:
		}
	}
	wall := time.Duration(req.GetLimits().GetWallMs()) * time.Millisecond
	o := f.interpret(ctx, string(req.GetCode()), map[string]string{}, func(string) (string, error) {
		return "", fmt.Errorf("no llm in programs")
	}, wall)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return o.result(), nil
}

func (f *fakeRuntime) session(stream pb.Runtime_SessionServer) error {
	first, err := stream.Recv()
	if err != nil || first.GetOpen() == nil {
		return fmt.Errorf("want open first")
	}
	vars := map[string]string{}
	files := map[string][]byte{}
	if c := first.GetOpen().GetContext(); c != nil {
		if c.GetKind() == "json" {
			vars["context"] = string(c.GetData())
		} else {
			b, _ := json.Marshal(string(c.GetData()))
			vars["context"] = string(b)
		}
	}
	var sendMu sync.Mutex
	send := func(m *pb.SessionResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	if err := send(&pb.SessionResponse{Msg: &pb.SessionResponse_Opened{Opened: &pb.Opened{RuntimeVersion: "Fake 1.0"}}}); err != nil {
		return err
	}
	// Requests are read here; cells run one at a time on their own
	// goroutine so that callback replies and cancels keep flowing.
	replies := map[uint64]chan *pb.CallbackReply{}
	var mu sync.Mutex
	var callID uint64
	var cellMu sync.Mutex
	var curCancel context.CancelFunc // the running cell's
	for {
		m, err := stream.Recv()
		if err != nil {
			return nil
		}
		switch x := m.GetMsg().(type) {
		case *pb.SessionRequest_Execute:
			go func() {
				cellMu.Lock()
				defer cellMu.Unlock()
				llm := func(p string) (string, error) {
					mu.Lock()
					callID++
					id := callID
					ch := make(chan *pb.CallbackReply, 1)
					replies[id] = ch
					mu.Unlock()
					if err := send(&pb.SessionResponse{Msg: &pb.SessionResponse_Callback{Callback: &pb.Callback{CallId: id, Kind: "llm_query", Prompts: []string{p}}}}); err != nil {
						return "", err
					}
					r := <-ch
					if r.GetError() != "" {
						return "", fmt.Errorf("%s", r.GetError())
					}
					return r.GetResults()[0], nil
				}
				wall := time.Duration(x.Execute.GetTimeoutMs()) * time.Millisecond
				if wall <= 0 {
					wall = time.Minute
				}
				cctx, cancel := context.WithCancel(stream.Context())
				defer cancel()
				mu.Lock()
				curCancel = cancel
				mu.Unlock()
				for _, fl := range x.Execute.GetFiles() {
					if strings.HasPrefix(fl.GetPath(), "bad") {
						_ = send(&pb.SessionResponse{Msg: &pb.SessionResponse_Result{Result: &pb.CellResult{Id: x.Execute.GetId(),
							FilesError: fmt.Sprintf("file %q: it is a symlink", fl.GetPath())}}})
						return
					}
					files[fl.GetPath()] = fl.GetData()
				}
				o := f.interpretIn(cctx, string(x.Execute.GetCode()), vars, files, llm, wall)
				if !x.Execute.GetReturnFiles() {
					o.files = nil
				}
				_ = send(&pb.SessionResponse{Msg: &pb.SessionResponse_Result{Result: &pb.CellResult{Id: x.Execute.GetId(), Result: o.result()}}})
			}()
		case *pb.SessionRequest_GetVariable:
			cellMu.Lock()
			v, ok := vars[x.GetVariable.GetName()]
			cellMu.Unlock()
			_ = send(&pb.SessionResponse{Msg: &pb.SessionResponse_Variable{Variable: &pb.Variable{Id: x.GetVariable.GetId(), Found: ok, Json: v}}})
		case *pb.SessionRequest_CallbackReply:
			mu.Lock()
			ch := replies[x.CallbackReply.GetCallId()]
			delete(replies, x.CallbackReply.GetCallId())
			mu.Unlock()
			if ch != nil {
				ch <- x.CallbackReply
			}
		case *pb.SessionRequest_Cancel:
			mu.Lock()
			if curCancel != nil {
				curCancel()
			}
			mu.Unlock()
		case *pb.SessionRequest_Close:
			return nil
		}
	}
}

// mock is the runtime service that speaks f's language: the mock runtime
// with f's calls, which a test may replace one by one.
func (f *fakeRuntime) mock() *plugintest.Runtime {
	return &plugintest.Runtime{InfoF: f.info, RunF: f.run, SessionF: f.session}
}

// fakeOpener serves f in process; every open is a new "plugin" and opens
// counts them.
func fakeOpener(t testing.TB, f *fakeRuntime, opens *atomic.Int64) server.Opener {
	return mockOpener(t, f.mock(), opens)
}

// mockOpener serves impl over go-plugin's gRPC transport
// (plugintest.Connect); every open is a new connection, counted in opens.
func mockOpener(t testing.TB, impl pb.RuntimeServer, opens *atomic.Int64) server.Opener {
	return func(ctx context.Context, name string) (*client.Runtime, error) {
		if opens != nil {
			opens.Add(1)
		}
		c, stop := plugintest.Connect(t, impl)
		return client.NewRuntime(name, "fake", c, stop, isolate.Available), nil
	}
}
