package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// fakeRuntime is a plugin.Runtime whose Run and OpenSession are the test's;
// it counts the runs that reached it.
type fakeRuntime struct {
	run   func(core.Program) (*core.Result, error)
	runs  int
	check func(string) (bool, string, error)
	// infoFails is how many Info calls fail before one answers.
	infoFails int
	infos     int // Info calls
}

func (f *fakeRuntime) Info(context.Context) (core.Info, error) {
	f.infos++
	if f.infoFails > 0 {
		f.infoFails--
		return core.Info{}, errors.New("not yet")
	}
	return core.Info{Name: "fake", Backend: "fakebackend", Available: true}, nil
}

func (f *fakeRuntime) Run(_ context.Context, p core.Program) (*core.Result, error) {
	f.runs++
	return f.run(p)
}

func (f *fakeRuntime) Check(_ context.Context, code string) (bool, string, error) {
	return f.check(code)
}

// sessionRuntime adds sessions to fakeRuntime.
type sessionRuntime struct {
	fakeRuntime
	opened, closed int
}

func (s *sessionRuntime) OpenSession(_ context.Context, open core.SessionOptions) (*plugin.Session, error) {
	if open.Context != nil && strings.Contains(string(open.Context.Data), "fail") {
		return nil, errors.New("the interpreter would not start")
	}
	s.opened++
	return &plugin.Session{REPL: echoREPL{}, RuntimeVersion: "9.9",
		Options: plugin.SessionOptions{Isolation: "process"}, Close: func() { s.closed++ }}, nil
}

// echoREPL prints each cell's code back.
type echoREPL struct{}

func (echoREPL) Execute(_ context.Context, code string, _ time.Duration, _ plugin.CallbackFunc) (*core.Result, error) {
	return &core.Result{Stdout: code, EndedBy: ending.Exit}, nil
}
func (echoREPL) Variable(context.Context, string) (bool, string, error) { return false, "", nil }
func (echoREPL) Interrupt() error                                       { return nil }

func TestAdapterChecksRequestsBeforeTheRuntime(t *testing.T) {
	rt := &fakeRuntime{run: func(core.Program) (*core.Result, error) { return &core.Result{}, nil }}
	srv := plugin.NewServer(rt)
	for name, req := range map[string]*pb.RunRequest{
		"env name with =":        {Env: map[string][]byte{"A=B": []byte("x")}},
		"env name a shell drops": {Env: map[string][]byte{"BAD NAME": []byte("x")}},
		"env value NUL":          {Env: map[string][]byte{"A": []byte("x\x00y")}},
		"unknown level":          {Limits: &pb.Limits{Isolation: "docker"}},
	} {
		_, err := srv.Run(context.Background(), req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	if rt.runs != 0 {
		t.Errorf("the runtime ran %d refused requests", rt.runs)
	}
}

func TestAdapterCodesAndStamps(t *testing.T) {
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{plugin.Invalid(errors.New("bad file")), codes.InvalidArgument},
		{plugin.Unavailable(errors.New("no perl")), codes.FailedPrecondition},
		{errors.New("disk full"), codes.Internal},
		{context.Canceled, codes.Canceled},
		{status.Error(codes.Unimplemented, "no check"), codes.Unimplemented},
	} {
		srv := plugin.NewServer(&fakeRuntime{run: func(core.Program) (*core.Result, error) { return nil, c.err },
			check: func(string) (bool, string, error) { return false, "", c.err }})
		_, err := srv.Run(context.Background(), &pb.RunRequest{})
		if status.Code(err) != c.want || !strings.Contains(c.err.Error(), status.Convert(err).Message()) {
			t.Errorf("Run error %v: got %v, want %v", c.err, err, c.want)
		}
		_, err = srv.Check(context.Background(), &pb.CheckRequest{Code: []byte("x")})
		if status.Code(err) != c.want {
			t.Errorf("Check error %v: got %v, want %v", c.err, err, c.want)
		}
	}
	srv := plugin.NewServer(&fakeRuntime{run: func(core.Program) (*core.Result, error) { return &core.Result{Stdout: "hi"}, nil },
		check: func(code string) (bool, string, error) { return code == "ok", "line 1: " + code, nil }})
	res, err := srv.Run(context.Background(), &pb.RunRequest{})
	if err != nil || res.GetBackend() != "fakebackend" {
		t.Errorf("Run: %v, backend %q, want the Info's fakebackend", err, res.GetBackend())
	}
	cr, err := srv.Check(context.Background(), &pb.CheckRequest{Code: []byte("nope")})
	if err != nil || cr.GetOk() || cr.GetMessage() != "line 1: nope" {
		t.Errorf("Check: %v %v", cr, err)
	}
}

// The first Run asks Info twice (its level check, then the stamp); both fail.
func TestAdapterAsksInfoUntilItAnswers(t *testing.T) {
	rt := &fakeRuntime{infoFails: 2, run: func(core.Program) (*core.Result, error) { return &core.Result{}, nil }}
	srv := plugin.NewServer(rt)
	first, err := srv.Run(context.Background(), &pb.RunRequest{})
	if err != nil || first.GetBackend() != "" {
		t.Fatalf("first run: %v, backend %q, want none stamped while Info fails", err, first.GetBackend())
	}
	second, err := srv.Run(context.Background(), &pb.RunRequest{})
	if err != nil || second.GetBackend() != "fakebackend" {
		t.Errorf("second run: %v, backend %q, want the Info's once it answered", err, second.GetBackend())
	}
}

func TestAdapterKeepsTheHostsInfo(t *testing.T) {
	rt := &fakeRuntime{run: func(core.Program) (*core.Result, error) { return &core.Result{}, nil }}
	srv := plugin.NewServer(rt)
	if _, err := srv.Info(context.Background(), &pb.InfoRequest{}); err != nil {
		t.Fatal(err)
	}
	res, err := srv.Run(context.Background(), &pb.RunRequest{})
	if err != nil || res.GetBackend() != "fakebackend" || rt.infos != 1 {
		t.Errorf("run after the host's Info: %v, backend %q, %d Info calls, want the one the host made", err, res.GetBackend(), rt.infos)
	}
}

// The runtime sees the request as core's Program and answers a core
// Result; the adapter translates both ways (core/runtimepb/translate.go).
func TestAdapterTranslates(t *testing.T) {
	var got core.Program
	srv := plugin.NewServer(&fakeRuntime{run: func(p core.Program) (*core.Result, error) {
		got = p
		return &core.Result{Stdout: "out", Duration: 2500 * time.Microsecond, EndedBy: ending.Timeout, ExitCode: -1}, nil
	}})
	res, err := srv.Run(context.Background(), &pb.RunRequest{Code: []byte("print(1)"), Args: pb.Bytes([]string{"a"}),
		Env: map[string][]byte{"K": []byte("v")}, Limits: &pb.Limits{WallMs: 1500, Isolation: "process"},
		Files: []*pb.File{{Path: "in.txt", Data: []byte("x"), Mode: 0o600}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Code != "print(1)" || len(got.Args) != 1 || got.Args[0] != "a" || got.Env["K"] != "v" ||
		got.Limits.Wall != 1500*time.Millisecond || got.Limits.Isolation != "process" ||
		len(got.Files) != 1 || got.Files[0].Mode != 0o600 {
		t.Errorf("the runtime got %+v", got)
	}
	if string(res.GetStdout()) != "out" || res.GetEndedBy() != pb.EndedBy_TIMEOUT || res.GetExitCode() != -1 ||
		res.GetDurationMs() != 2 || res.GetDurationUs() != 2500 || res.GetBackend() != "fakebackend" {
		t.Errorf("the wire got %v", res)
	}
}

func TestAdapterRefusesEmptyAnswers(t *testing.T) {
	srv := plugin.NewServer(&fakeRuntime{run: func(core.Program) (*core.Result, error) { return nil, nil }})
	if _, err := srv.Run(context.Background(), &pb.RunRequest{}); status.Code(err) != codes.Internal {
		t.Errorf("a run with no result and no error: %v, want Internal", err)
	}
	_, first := session(t, plugin.NewServer(&nilSessions{}), &pb.OpenSession{})
	if e := first.GetError(); e == nil || !e.GetFatal() || !strings.Contains(e.GetMessage(), "opened no session") {
		t.Errorf("a session opened as nil: %v, want a fatal error", first)
	}
}

// nilSessions opens sessions as nil, a plugin's bug the adapter reports.
type nilSessions struct{ fakeRuntime }

func (*nilSessions) OpenSession(context.Context, core.SessionOptions) (*plugin.Session, error) {
	return nil, nil
}

// session opens a session on srv over a real in-process gRPC connection and
// returns the first response.
func session(t *testing.T, srv pb.RuntimeServer, open *pb.OpenSession) (pb.Runtime_SessionClient, *pb.SessionResponse) {
	t.Helper()
	client, _ := plugintest.Connect(t, srv)
	stream, err := client.Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Open{Open: open}}); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return stream, first
}

func TestAdapterOpensSessions(t *testing.T) {
	rt := &sessionRuntime{}
	srv := plugin.NewServer(rt)
	stream, first := session(t, srv, &pb.OpenSession{})
	if o := first.GetOpened(); o == nil || o.GetBackend() != "fakebackend" || o.GetRuntimeVersion() != "9.9" {
		t.Fatalf("first message %v, want Opened with the Info's backend and the session's version", first)
	}
	if err := stream.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Execute{Execute: &pb.Execute{Id: 1, Code: []byte("1+1")}}}); err != nil {
		t.Fatal(err)
	}
	got, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r := got.GetResult().GetResult(); string(r.GetStdout()) != "1+1" || r.GetBackend() != "fakebackend" || r.GetIsolation() != "process" {
		t.Errorf("cell result %v", got)
	}
	_ = stream.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Close{Close: &pb.Close{}}})
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("after close: %v, want the stream's end", err)
	}
	if rt.opened != 1 || rt.closed != 1 {
		t.Errorf("opened %d closed %d, want 1 and 1", rt.opened, rt.closed)
	}

	// What the adapter refuses never reaches OpenSession; what OpenSession
	// refuses is a fatal error with its text.
	for open, want := range map[*pb.OpenSession]string{
		{Env: map[string][]byte{"": nil}}:                                  "name is not valid",
		{Context: &pb.Context{Kind: "json", Data: []byte("{")}}:            "not valid JSON",
		{Context: &pb.Context{Kind: "yaml"}}:                               "unknown context kind",
		{Limits: &pb.Limits{Isolation: "vm"}}:                              "unknown isolation level",
		{Context: &pb.Context{Kind: "text", Data: []byte("fail, please")}}: "would not start",
	} {
		_, first := session(t, srv, open)
		if e := first.GetError(); e == nil || !e.GetFatal() || !strings.Contains(e.GetMessage(), want) {
			t.Errorf("open %v: got %v, want a fatal error containing %q", open, first, want)
		}
	}
	if rt.opened != 1 {
		t.Errorf("%d sessions opened, want only the first", rt.opened)
	}

	// A runtime without sessions answers Unimplemented.
	client, _ := plugintest.Connect(t, plugin.NewServer(&fakeRuntime{}))
	stream2, err := client.Session(context.Background())
	if err == nil {
		_, err = stream2.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("session on a runtime without sessions: %v, want Unimplemented", err)
	}
}

// queryREPL asks the host two queries per cell and prints the answers.
type queryREPL struct{ echoREPL }

func (queryREPL) Execute(ctx context.Context, _ string, _ time.Duration, cb plugin.CallbackFunc) (*core.Result, error) {
	a, err := cb(ctx, core.Query{Kind: "llm_query", Prompts: []string{"p1"}, Model: "m"})
	if err != nil {
		return nil, err
	}
	b, err := cb(ctx, core.Query{Kind: "rlm_query", Prompts: []string{"p2", "p3"}, Contexts: []string{"c2", ""}, HasContext: []bool{true, false}})
	if err != nil {
		return nil, err
	}
	return &core.Result{Stdout: strings.Join(append(a, b...), ","), EndedBy: ending.Exit}, nil
}

type queryRuntime struct{ fakeRuntime }

func (*queryRuntime) OpenSession(context.Context, core.SessionOptions) (*plugin.Session, error) {
	return &plugin.Session{REPL: queryREPL{}}, nil
}

// A cell's queries reach the client as the wire's Callback, each with its
// own call id (the adapter numbers them), and the replies, matched by id,
// reach the cell.
func TestAdapterForwardsQueries(t *testing.T) {
	stream, _ := session(t, plugin.NewServer(&queryRuntime{}), &pb.OpenSession{})
	if err := stream.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Execute{Execute: &pb.Execute{Id: 1, Code: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	ids := map[uint64]bool{}
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r := m.GetResult(); r != nil {
			if out := string(r.GetResult().GetStdout()); out != "A:p1,A:p2,A:p3" {
				t.Errorf("cell printed %q, want the answers in order", out)
			}
			break
		}
		cb := m.GetCallback()
		if cb == nil {
			t.Fatalf("unexpected message %v", m)
		}
		if ids[cb.GetCallId()] {
			t.Errorf("call id %d repeats", cb.GetCallId())
		}
		ids[cb.GetCallId()] = true
		got = append(got, fmt.Sprintf("%s %q %q %v %q", cb.GetKind(), cb.GetPrompts(), cb.GetContexts(), cb.GetHasContext(), cb.GetModel()))
		answers := make([]string, len(cb.GetPrompts()))
		for i, p := range cb.GetPrompts() {
			answers[i] = "A:" + p
		}
		reply := &pb.CallbackReply{CallId: cb.GetCallId(), Results: answers}
		if err := stream.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_CallbackReply{CallbackReply: reply}}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{`llm_query ["p1"] [] [] "m"`, `rlm_query ["p2" "p3"] ["c2" ""] [true false] ""`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("callbacks:\n%q\nwant\n%q", got, want)
	}
}
