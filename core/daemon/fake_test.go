package daemon

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// The test binary doubles as a runtime plugin ("fake") when started with
// RLM_FAKE_PLUGIN=1, so the daemon under test launches a real plugin
// process over go-plugin, as it does for python.
func TestMain(m *testing.M) {
	if os.Getenv("RLM_FAKE_PLUGIN") == "1" {
		plugin.ServeGRPC(fakeRuntime())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeFakePlugin puts an rlm-plugin-fake launcher into dir.
func writeFakePlugin(t *testing.T, dir string) {
	t.Helper()
	plugintest.WritePlugin(t, dir, "fake", "RLM_FAKE_PLUGIN=1", "RLM_FAKE_DIR="+dir)
}

// fakeRuntime is a runtime whose REPL understands a few commands, one per
// cell:
//
//	set NAME VALUE   define a variable
//	echo TEXT        print TEXT
//	exit N           end the cell with exit status N
//	llm PROMPT       ask the client's llm_query and print the answer
//	block            run until cancelled or the session ends
//	crash            the session dies (the stream fails)
//	live             print the number of sessions open in this process
//
// While a file named poison exists in $RLM_FAKE_DIR, every session dies at
// its next variable read (as an idle worker's health check is), which is
// how a test kills idle workers.
//
// Run answers "run:" + code, so a test sees whether Run was proxied; for
// "pid" it answers its process id, and "die" makes the plugin exit.
//
// The calls are the mock runtime's function fields (core/plugin/plugintest).
func fakeRuntime() *plugintest.Runtime {
	var live atomic.Int64 // sessions open in this process
	return &plugintest.Runtime{
		InfoF: func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
			return &pb.InfoResponse{Name: "fake", Available: true, Backend: "native", RuntimeVersion: "Fake 1.0", Capabilities: []string{"repl", "program", "check"}}, nil
		},
		RunF: func(_ context.Context, req *pb.RunRequest) (*pb.Result, error) {
			switch string(req.GetCode()) {
			case "pid":
				return &pb.Result{Stdout: []byte(strconv.Itoa(os.Getpid())), Backend: "native", EndedBy: pb.EndedBy_EXIT}, nil
			case "die":
				// A program that kills its plugin, after running a moment
				// (the request's accepted header has left).
				time.Sleep(200 * time.Millisecond)
				os.Exit(3)
			}
			return &pb.Result{Stdout: []byte("run:" + string(req.GetCode())), Backend: "native", EndedBy: pb.EndedBy_EXIT}, nil
		},
		CheckF: func(_ context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
			return &pb.CheckResponse{Ok: !strings.Contains(string(req.GetCode()), "(")}, nil
		},
		SessionF: func(s pb.Runtime_SessionServer) error { return fakeSession(s, &live) },
	}
}

// fakeSession serves one session of the fake REPL; live counts the open
// ones.
func fakeSession(s pb.Runtime_SessionServer, live *atomic.Int64) error {
	live.Add(1)
	defer live.Add(-1)
	first, err := s.Recv()
	if err != nil || first.GetOpen() == nil {
		return status.Error(codes.InvalidArgument, "want open")
	}
	vars := map[string]string{}
	if c := first.GetOpen().GetContext(); c != nil {
		vars["context"] = string(c.GetData())
	}
	if err := s.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Opened{Opened: &pb.Opened{RuntimeVersion: "Fake 1.0", Backend: "native"}}}); err != nil {
		return err
	}
	in := make(chan *pb.SessionRequest)
	go func() {
		defer close(in)
		for {
			m, err := s.Recv()
			if err != nil {
				return
			}
			in <- m
		}
	}()
	var callID uint64
	for m := range in {
		switch x := m.GetMsg().(type) {
		case *pb.SessionRequest_Close:
			return nil
		case *pb.SessionRequest_GetVariable:
			if _, err := os.Stat(os.Getenv("RLM_FAKE_DIR") + "/poison"); err == nil {
				return status.Error(codes.Internal, "interpreter killed")
			}
			v, ok := vars[x.GetVariable.GetName()]
			if err := s.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Variable{Variable: &pb.Variable{
				Id: x.GetVariable.GetId(), Found: ok, Json: strconv.Quote(v)}}}); err != nil {
				return err
			}
		case *pb.SessionRequest_Execute:
			cmd, arg, _ := strings.Cut(string(x.Execute.GetCode()), " ")
			res := &pb.Result{EndedBy: pb.EndedBy_EXIT, Backend: "native"}
			switch cmd {
			case "set":
				k, v, _ := strings.Cut(arg, " ")
				vars[k] = v
			case "echo":
				res.Stdout = []byte(arg)
			case "exit":
				n, _ := strconv.Atoi(arg)
				res.ExitCode = int32(n)
			case "timeout":
				res.Stdout = []byte(strconv.FormatInt(x.Execute.GetTimeoutMs(), 10))
			case "live":
				res.Stdout = []byte(strconv.FormatInt(live.Load(), 10))
			case "crash":
				return status.Error(codes.Internal, "interpreter died")
			case "block":
				for m := range in {
					if m.GetCancel() != nil {
						break
					}
				}
				res.EndedBy = pb.EndedBy_CANCELLED
			case "llm":
				callID++
				if err := s.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Callback{Callback: &pb.Callback{
					CallId: callID, Kind: "llm_query", Prompts: []string{arg}}}}); err != nil {
					return err
				}
				var reply *pb.CallbackReply
				for m := range in {
					if reply = m.GetCallbackReply(); reply != nil {
						break
					}
				}
				if reply == nil {
					return nil
				}
				if reply.GetError() != "" {
					res.ExitCode = 1
					res.Error = reply.GetError()
				} else {
					res.Stdout = []byte(strings.Join(reply.GetResults(), ","))
				}
			default:
				res.ExitCode = 1
				res.Error = "unknown command " + cmd
			}
			if err := s.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Result{Result: &pb.CellResult{Id: x.Execute.GetId(), Result: res}}}); err != nil {
				return err
			}
		}
	}
	return nil
}
