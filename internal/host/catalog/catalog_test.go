package catalog_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/host/catalog"
	"github.com/rlmkit/rlm/internal/host/launch"
)

// The test binary doubles as a plugin when RLM_CATALOG_PLUGIN names how its
// Info answers (see infos).
func TestMain(m *testing.M) {
	if kind := os.Getenv("RLM_CATALOG_PLUGIN"); kind != "" {
		info := infos[kind]
		if kind == "env" {
			info = envInfo
		}
		plugin.ServeGRPC(&plugintest.Runtime{InfoF: info})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var infos = map[string]func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error){
	// good: available, with sessions, at two levels for programs.
	"good": func(_ context.Context, req *pb.InfoRequest) (*pb.InfoResponse, error) {
		return &pb.InfoResponse{Name: req.GetRuntime(), PluginVersion: "1.2", RuntimeVersion: "Good 3", Available: true,
			Capabilities: []string{"program", "repl"}, IsolationLevels: []string{"none", "process"}, Backend: "native"}, nil
	},
	// down: answers, but cannot run here; no sessions.
	"down": func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
		return &pb.InfoResponse{Name: "down", UnavailableReason: "'down' not found in PATH", Capabilities: []string{"program"}}, nil
	},
	// mute: starts, but its Info fails.
	"mute": func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
		return nil, status.Error(codes.Internal, "probe failed\nsecond line")
	},
}

// envInfo is the Info of the plugin kind "env": it says, as its
// RuntimeVersion, the GODEBUG it started with and the one it runs with
// (runtimepb.PluginEnv, RestorePluginEnv).
func envInfo(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
	start := "unset"
	environ, _ := os.ReadFile("/proc/self/environ")
	for _, kv := range strings.Split(string(environ), "\x00") {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			start = v
		}
	}
	now, ok := os.LookupEnv("GODEBUG")
	if !ok {
		now = "unset"
	}
	return &pb.InfoResponse{Name: "env", RuntimeVersion: start + " | " + now, Available: true, Capabilities: []string{"program"}}, nil
}

// pluginDir holds an rlm-plugin-KIND for each kind of infos, and a
// crashy one that exits before its handshake.
func pluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for kind := range infos {
		plugintest.WritePlugin(t, dir, kind, "RLM_CATALOG_PLUGIN="+kind)
	}
	if err := os.WriteFile(filepath.Join(dir, pb.Prefix+"crashy"), []byte("#!/bin/sh\necho cannot start >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestList(t *testing.T) {
	dir := pluginDir(t)
	entries := catalog.List(context.Background(), launch.SearchPath{dir})
	var names []string
	byName := map[string]catalog.Entry{}
	for _, e := range entries {
		names = append(names, e.Name)
		byName[e.Name] = e
		if e.Path != filepath.Join(dir, pb.Prefix+e.Name) {
			t.Errorf("%s: path %s", e.Name, e.Path)
		}
	}
	if !slices.Equal(names, []string{"crashy", "down", "good", "mute"}) {
		t.Fatalf("listed %v", names)
	}

	good := byName["good"]
	if !good.Available() || good.Reason() != "" || good.Info.PluginVersion != "1.2" || good.Info.Name != "good" {
		t.Errorf("good: %+v", good)
	}
	if !good.Sessions() || !slices.Equal(good.Isolation(), []string{"none", "process"}) || !slices.Equal(good.SessionIsolation(), []string{"none"}) {
		t.Errorf("good: sessions %v, isolation %v, session isolation %v", good.Sessions(), good.Isolation(), good.SessionIsolation())
	}

	down := byName["down"]
	if down.Available() || down.Reason() != "'down' not found in PATH" || down.Sessions() || down.SessionIsolation() != nil {
		t.Errorf("down: available %v, reason %q, session isolation %v", down.Available(), down.Reason(), down.SessionIsolation())
	}

	mute := byName["mute"]
	if mute.Available() || mute.Info != nil || mute.Isolation() != nil || !strings.HasSuffix(mute.Reason(), "probe failed") {
		t.Errorf("mute: available %v, reason %q", mute.Available(), mute.Reason())
	}

	crashy := byName["crashy"]
	if crashy.Available() || !strings.Contains(crashy.Reason(), "failed to start: exited before completing its handshake") || strings.Contains(crashy.Reason(), "\n") {
		t.Errorf("crashy: reason %q", crashy.Reason())
	}
}

// Open hands over the running plugin with its fingerprint; a plugin that
// is not there is a launch.NotFoundError.
func TestOpen(t *testing.T) {
	sp := launch.SearchPath{pluginDir(t)}
	p, err := catalog.Open(context.Background(), sp, "good", "python")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if !p.Available() || p.Info.Name != "python" {
		t.Errorf("fingerprint: %+v", p.Fingerprint)
	}
	if _, err := p.Client.Info(context.Background(), &pb.InfoRequest{}); err != nil {
		t.Errorf("the plugin Open returned is not running: %v", err)
	}

	m, err := catalog.Open(context.Background(), sp, "mute", "mute")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	if m.Err == nil || m.Exited() {
		t.Errorf("mute: err %v, exited %v; want the Info error and the plugin still running", m.Err, m.Exited())
	}

	var nf *launch.NotFoundError
	if _, err := catalog.Open(context.Background(), sp, "absent", "absent"); !errors.As(err, &nf) || nf.Name != "absent" {
		t.Errorf("absent: %v", err)
	}
}

// TestPluginEnvironment: a launched plugin starts with runtimepb.PluginEnv's
// GODEBUG (the host's own settings after it) and runs with the host's.
func TestPluginEnvironment(t *testing.T) {
	for _, host := range []string{"", "madvdontneed=1"} {
		t.Setenv("GODEBUG", host)
		dir := t.TempDir()
		plugintest.WritePlugin(t, dir, "env", "RLM_CATALOG_PLUGIN=env")
		entries := catalog.List(context.Background(), launch.SearchPath{dir})
		if len(entries) != 1 || entries[0].Info == nil {
			t.Fatalf("listed %+v", entries)
		}
		want := "schedtrace=2147483647 | unset"
		if host != "" {
			want = "schedtrace=2147483647," + host + " | " + host
		}
		if got := entries[0].Info.RuntimeVersion; got != want {
			t.Errorf("host GODEBUG %q: the plugin said %q, want %q", host, got, want)
		}
	}
}
