package daemoncmd

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/daemon"
	"github.com/rlmkit/rlm/internal/host/launch"
)

func newOpts(t *testing.T, toml string) *Options {
	t.Helper()
	t.Setenv("RLM_DAEMON_SOCKET", "")
	t.Setenv("RLM_DAEMON_WORKERS", "")
	t.Setenv("RLM_DAEMON_RUNTIMES", "")
	p := filepath.Join(t.TempDir(), "rlm.toml")
	if err := os.WriteFile(p, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	io := &cmdutil.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	return &Options{F: &cmdutil.Factory{IO: io, ConfigPath: p}}
}

// parse runs `rlm daemon ARGS` up to the run function and returns the
// parsed options and the action.
func parse(t *testing.T, o *Options, args ...string) (*Options, string) {
	t.Helper()
	var got *Options
	var action string
	cmd := NewCmd(o.F, func(o *Options, a string) error { got, action = o, a; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(o.F.IO.Out)
	cmd.SetErr(o.F.IO.ErrOut)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	return got, action
}

func TestConfigUnderFlags(t *testing.T) {
	dir := t.TempDir()
	o := newOpts(t, "[daemon]\nsocket = \""+dir+"/cfg.sock\"\nworkers = 3\nruntimes = [\"python\", \"node\"]\n")
	got, action := parse(t, o, "start")
	if action != Start {
		t.Fatalf("action %q", action)
	}
	dc, err := got.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if dc.Socket != dir+"/cfg.sock" || dc.Workers != 3 || !reflect.DeepEqual(dc.Runtimes, []string{"python", "node"}) {
		t.Fatalf("from config: %+v", dc)
	}

	got, action = parse(t, o, "--socket", dir+"/flag.sock", "--workers", "0", "--runtimes", "shell, python")
	if action != Foreground {
		t.Fatalf("action %q", action)
	}
	dc, err = got.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if dc.Socket != dir+"/flag.sock" || dc.Workers != 0 || !reflect.DeepEqual(dc.Runtimes, []string{"shell", "python"}) {
		t.Fatalf("flags over config: %+v", dc)
	}
}

func TestWorkersOutOfRangeIsAUsageError(t *testing.T) {
	o := newOpts(t, "")
	got, _ := parse(t, o, "--workers", "-1")
	_, err := got.resolve()
	var ee *cmdutil.ExitError
	if err == nil || !strings.Contains(err.Error(), "--workers -1") || !asExit(err, &ee) || ee.Code != cmdutil.ExitUsage {
		t.Fatalf("got %v", err)
	}
}

func TestRelativeSocketBecomesAbsolute(t *testing.T) {
	o := newOpts(t, "")
	got, action := parse(t, o, "status", "--socket", "rel.sock", "--json")
	if action != Status || !got.JSON {
		t.Fatalf("action %q json %v", action, got.JSON)
	}
	dc, err := got.resolve()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if dc.Socket != filepath.Join(wd, "rel.sock") {
		t.Fatalf("socket %q", dc.Socket)
	}
}

func asExit(err error, target **cmdutil.ExitError) bool {
	e, ok := err.(*cmdutil.ExitError)
	if ok {
		*target = e
	}
	return ok
}

// A runtime without a plugin stops the daemon at start: a name rlm does not
// ship is a usage error, a built-in one whose plugin is missing exit 127.
func TestRuntimesWithoutPluginRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rlm-plugin-python"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		runtimes []string
		code     int // 0: accepted
		msg      string
	}{
		{[]string{"python"}, 0, ""},
		{[]string{"python", "cobol"}, cmdutil.ExitUsage, `unknown runtime "cobol": use python, golang, node, shell, c, cpp, java, rust, or install a plugin named rlm-plugin-cobol ('rlm plugins' lists those installed)`},
		{[]string{"node"}, cmdutil.ExitNoRuntime, `no plugin for runtime "node"`},
	} {
		err := checkRuntimes(daemon.Config{Runtimes: tc.runtimes, Plugins: launch.SearchPath{dir}})
		if tc.code == 0 {
			if err != nil {
				t.Errorf("%v: %v", tc.runtimes, err)
			}
			continue
		}
		var ee *cmdutil.ExitError
		if !asExit(err, &ee) || ee.Code != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: got %v, want exit %d with %q", tc.runtimes, err, tc.code, tc.msg)
		}
	}
}
