// Command rlm-plugin-perl is a third-party rlm runtime plugin: it runs Perl
// programs. It lives in a module of its own and uses only rlm's public
// packages, as any plugin outside the rlm repository would:
//
//   - core/plugin serves the runtime service over go-plugin (Serve);
//   - core/proto is the service (Info, Run, Check, Session);
//   - core/program runs one program in a private working directory with
//     capped output, a wall-clock limit on the whole process group, and
//     the produced files collected;
//   - core/toolpath finds perl and caches its version.
//
// Build it and put it where rlm looks for plugins:
//
//	go build -o ~/.rlm/plugins/rlm-plugin-perl .
//	rlm plugins
//	rlm exec -r perl -c 'print "hello\n"'
package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/proctree"
	"github.com/rlmkit/rlm/core/program"
	pb "github.com/rlmkit/rlm/core/proto"
	"github.com/rlmkit/rlm/core/toolpath"
)

// version is this plugin's own version, reported by Info.
const version = "0.1.0"

// probe asks perl for its version once; toolpath caches the answer on disk
// until the executable changes.
func probe(path string) (toolpath.Tool, error) {
	out, err := exec.Command(path, "-e", `printf "perl %vd", $^V`).Output()
	if err != nil {
		return toolpath.Tool{}, err
	}
	return toolpath.Tool{Exe: path, Version: strings.TrimSpace(string(out))}, nil
}

type server struct {
	// Embedding the generated base makes the RPCs this plugin does not
	// offer (Session) answer "unimplemented", which rlm reports clearly.
	pb.UnimplementedRuntimeServer
}

func (server) Info(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
	r := &pb.InfoResponse{
		Name:            "perl",
		PluginVersion:   version,
		Language:        "perl",
		FileExtension:   ".pl",
		Capabilities:    []string{"program", "check", "files"},
		Backend:         "native",
		IsolationLevels: []string{"none"},
	}
	t, err := toolpath.Resolve("perl", probe)
	if err != nil {
		// "'perl' not found in PATH": shown by `rlm plugins`.
		r.UnavailableReason = err.Error()
		return r, nil
	}
	r.Available, r.RuntimeVersion = true, t.Version
	return r, nil
}

func (server) Run(ctx context.Context, req *pb.RunRequest) (*pb.Result, error) {
	t, err := toolpath.Resolve("perl", probe)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "perl runtime unavailable: %v", err)
	}
	ws, err := program.NewWorkspace(req, "main.pl")
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	env := program.BaseEnv(ws.Dir)
	for k, v := range req.GetEnv() {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			ws.Remove()
			return nil, status.Errorf(codes.InvalidArgument, "env name %q is not valid", k)
		}
		env = append(env, k+"="+string(v))
	}
	res, err := program.Exec(ctx, program.Command{
		Argv:   append([]string{t.Exe, ws.CodePath}, pb.Strings(req.GetArgs())...),
		Dir:    ws.Dir,
		Env:    env,
		Stdin:  req.GetStdin(),
		Limits: req.GetLimits(),
	})
	if err != nil {
		ws.Remove()
		return nil, status.Error(codes.Internal, err.Error())
	}
	ws.Finish(res) // collects produced files, removes the directory
	return res, nil
}

func (server) Check(ctx context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
	t, err := toolpath.Resolve("perl", probe)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "perl runtime unavailable: %v", err)
	}
	cmd := exec.CommandContext(ctx, t.Exe, "-c", "-")
	cmd.Stdin = bytes.NewReader(req.GetCode())
	out, err := cmd.CombinedOutput()
	if _, failed := err.(*exec.ExitError); failed {
		return &pb.CheckResponse{Ok: false, Message: strings.TrimSpace(string(out))}, nil
	} else if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pb.CheckResponse{Ok: true}, nil
}

func main() {
	// Grandchildren that escape the program's process group are re-parented
	// here and killed after each run instead of outliving it.
	_ = proctree.BecomeSubreaper()
	plugin.Serve(server{})
}
