// Package plugintest is what a plugin's tests use: the session contract
// every REPL runtime must pass (session.go), and a mock runtime (after
// Nomad's plugins/base/testing.go) for tests of the host's side. Runtime
// implements the runtime service by
// calling its function fields, so each test writes only the calls it
// needs; Connect serves it in process over go-plugin's own gRPC transport
// (plugin.TestPluginGRPCConn), so the test talks to it through the client a
// launched plugin would give, without building a plugin binary.
package plugintest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"

	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// Runtime is a pb.RuntimeServer whose methods call the matching field. A
// nil field answers codes.Unimplemented, as a plugin without that call
// does.
type Runtime struct {
	pb.UnimplementedRuntimeServer

	InfoF    func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error)
	RunF     func(context.Context, *pb.RunRequest) (*pb.Result, error)
	CheckF   func(context.Context, *pb.CheckRequest) (*pb.CheckResponse, error)
	SessionF func(pb.Runtime_SessionServer) error
}

// Info calls InfoF.
func (r *Runtime) Info(ctx context.Context, req *pb.InfoRequest) (*pb.InfoResponse, error) {
	if r.InfoF == nil {
		return r.UnimplementedRuntimeServer.Info(ctx, req)
	}
	return r.InfoF(ctx, req)
}

// Run calls RunF.
func (r *Runtime) Run(ctx context.Context, req *pb.RunRequest) (*pb.Result, error) {
	if r.RunF == nil {
		return r.UnimplementedRuntimeServer.Run(ctx, req)
	}
	return r.RunF(ctx, req)
}

// Check calls CheckF.
func (r *Runtime) Check(ctx context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
	if r.CheckF == nil {
		return r.UnimplementedRuntimeServer.Check(ctx, req)
	}
	return r.CheckF(ctx, req)
}

// Session calls SessionF.
func (r *Runtime) Session(stream pb.Runtime_SessionServer) error {
	if r.SessionF == nil {
		return r.UnimplementedRuntimeServer.Session(stream)
	}
	return r.SessionF(stream)
}

// Connect serves impl in process and returns a client of it, as
// go-plugin's host side dispenses it (core/pb.Dispense), and a function
// that closes the connection and stops the server; the test's cleanup calls
// it too, so a test need not.
func Connect(t testing.TB, impl pb.RuntimeServer) (pb.RuntimeClient, func()) {
	t.Helper()
	client, server := goplugin.TestPluginGRPCConn(t, false, pb.PluginSet(impl))
	c, err := pb.Dispense(client)
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() {
		_ = client.Conn.Close()
		server.Stop()
	})
	t.Cleanup(stop)
	return c, stop
}

// WritePlugin puts dir/rlm-plugin-NAME: a script that starts this test
// binary with env (KEY=VALUE each) added, so that a test can launch a real
// plugin process without building one. The test's TestMain must see env
// and serve a runtime (core/plugin.ServeGRPC) instead of running the tests.
func WritePlugin(t testing.TB, dir, name string, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("#!/bin/sh\n")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&script, "%s=%q ", k, v)
	}
	fmt.Fprintf(&script, "exec %q \"$@\"\n", exe)
	if err := os.WriteFile(filepath.Join(dir, pb.Prefix+name), []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Main is the TestMain of a test binary that doubles as real plugins: run
// under the name rlm-plugin-NAME (a link LinkPlugins made), it runs
// mains[NAME] (that plugin's Main, e.g. plugins/python.Main) and exits;
// under any other name it runs the tests. The tests then launch real
// plugins, over real gRPC, without building them.
func Main(m *testing.M, mains map[string]func()) {
	if name, ok := strings.CutPrefix(filepath.Base(os.Args[0]), pb.Prefix); ok {
		if main, ok := mains[name]; ok {
			main()
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// LinkPlugins links dir/rlm-plugin-NAME, for each name, to this test
// binary, which Main then starts as that plugin.
func LinkPlugins(t testing.TB, dir string, names ...string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.Symlink(self, filepath.Join(dir, pb.Prefix+n)); err != nil {
			t.Fatal(err)
		}
	}
}
