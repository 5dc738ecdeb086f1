package execcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// The test binary doubles as the plugins the run tests use when
// RLM_EXEC_TEST_PLUGIN names one: "fakert", a runtime that reports what it
// was asked to run, "plainrt", the same declaring neither a syntax check
// nor requirements, and "downrt", one that is unavailable here.
func TestMain(m *testing.M) {
	switch os.Getenv("RLM_EXEC_TEST_PLUGIN") {
	case "fakert":
		plugin.ServeGRPC(fakeRuntime())
		os.Exit(0)
	case "plainrt":
		plugin.ServeGRPC(plainRuntime())
		os.Exit(0)
	case "downrt":
		plugin.ServeGRPC(&plugintest.Runtime{InfoF: func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
			return &pb.InfoResponse{Name: "downrt", UnavailableReason: "'down' not found in PATH"}, nil
		}})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeRuntime runs a program by printing what it got: its code, stdin,
// arguments and environment on stdout, "warn" on stderr. A program "exit N"
// ends with status N, "timeout" as timed out; with return_files it
// produces out/result.txt. Check fails code containing "bad".
func fakeRuntime() *plugintest.Runtime {
	return &plugintest.Runtime{
		InfoF: func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
			return &pb.InfoResponse{Name: "fakert", Available: true, FileExtension: ".fk", IsolationLevels: []string{"none"},
				Capabilities: []string{"program", "check", "requirements"}}, nil
		},
		RunF: func(_ context.Context, req *pb.RunRequest) (*pb.Result, error) {
			code := string(req.GetCode())
			out := fmt.Sprintf("code=%s stdin=%s args=%s wall=%d\n", code, req.GetStdin(), bytes.Join(req.GetArgs(), []byte(",")), req.GetLimits().GetWallMs())
			for _, k := range slices.Sorted(maps.Keys(req.GetEnv())) {
				out += fmt.Sprintf("env %s=%s\n", k, req.GetEnv()[k])
			}
			res := &pb.Result{Stdout: []byte(out), Stderr: []byte("warn\n"), EndedBy: pb.EndedBy_EXIT}
			if code == "timeout" {
				res.EndedBy, res.ExitCode, res.Error = pb.EndedBy_TIMEOUT, -1, "timed out after 1s"
			}
			if n, err := strconv.Atoi(strings.TrimPrefix(code, "exit ")); err == nil {
				res.ExitCode = int32(n)
			}
			if req.GetReturnFiles() {
				res.Files = []*pb.File{{Path: "out/result.txt", Data: []byte("result\n"), Size: 7, Change: "created"}}
			}
			return res, nil
		},
		CheckF: func(_ context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
			if strings.Contains(string(req.GetCode()), "bad") {
				return &pb.CheckResponse{Message: "line 1: bad syntax"}, nil
			}
			return &pb.CheckResponse{Ok: true}, nil
		},
	}
}

// factory is a Factory with in-memory streams, an empty config and a
// plugin directory holding the test plugins.
func factory(t *testing.T, stdin string) (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rlm.toml")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fakert", "plainrt", "downrt"} {
		plugintest.WritePlugin(t, plugins, name, "RLM_EXEC_TEST_PLUGIN="+name)
	}
	t.Setenv("RLM_PLUGIN_PATH", "")
	ios, out, errOut := cmdutil.TestIO(stdin)
	return &cmdutil.Factory{IO: ios, ConfigPath: cfg, PluginDirs: []string{plugins}}, out, errOut
}

// parse runs exec's flag parsing only and returns the Options it made.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	ios, _, _ := cmdutil.TestIO("")
	return cmdutil.ParseFlags(&cmdutil.Factory{IO: ios}, NewCmd, args...)
}

func TestFlags(t *testing.T) {
	o, err := parse(t, "-r", "shell", "-b", "native", "-c", "echo hi", "--timeout", "3s", "--arg", "a", "--arg", "b c",
		"--env", "K=V", "--file", "in.txt=/dev/null", "--out", "dir", "--json", "--requirements", "x,y", "--requirements", "z",
		"--max-output", "1KiB", "--fuel", "9", "--isolation", "process")
	if err != nil {
		t.Fatal(err)
	}
	if o.Runtime != "shell" || o.Backend != "native" || o.Code != "echo hi" || !o.CodeSet || o.File != "" ||
		o.Timeout != 3*time.Second || !slices.Equal(o.Args, []string{"a", "b c"}) || !slices.Equal(o.Env, []string{"K=V"}) ||
		!slices.Equal(o.Files, []string{"in.txt=/dev/null"}) || o.Out != "dir" || !o.JSON ||
		!slices.Equal(o.Requirements, []string{"x", "y", "z"}) || o.MaxOutput != "1KiB" || o.Fuel != 9 || o.Limits.Isolation != "process" {
		t.Errorf("parsed %+v", o)
	}
	if !o.Changed("timeout") || o.Changed("check") {
		t.Errorf("Changed: timeout %v, check %v", o.Changed("timeout"), o.Changed("check"))
	}

	o, err = parse(t, "prog.py")
	if err != nil || o.File != "prog.py" || o.CodeSet {
		t.Errorf("a FILE: %+v %v", o, err)
	}
	// -c "" is code too: an empty program, not a missing one.
	if o, err = parse(t, "-c", ""); err != nil || !o.CodeSet {
		t.Errorf("-c '': %+v %v", o, err)
	}
}

func TestFlagsUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-c", "x", "prog.py"}, {"a.py", "b.py"}} {
		o, err := parse(t, args...)
		var ee *cmdutil.ExitError
		if o != nil {
			t.Errorf("%q reached the run function", args)
		}
		if len(args) < 2 || args[0] == "-c" {
			if !errors.As(err, &ee) || ee.Code != cmdutil.ExitUsage || !strings.Contains(err.Error(), "exactly one") {
				t.Errorf("%q: %v, want the usage error", args, err)
			}
		} else if err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestProgram: the flags become the program's request, over the config.
func TestProgram(t *testing.T) {
	o, err := parse(t, "-c", "x", "--arg", "1", "--env", "A=b=c", "--max-output", "2KiB", "--timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	p, err := o.program(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	if p.Code != "x" || !slices.Equal(p.Args, []string{"1"}) || p.Env["A"] != "b=c" || p.Limits.MaxOutputBytes != 2048 || p.Limits.Wall != 5*time.Second || p.ReturnFiles {
		t.Errorf("program %+v", p)
	}
	for args, want := range map[string]string{
		"--env NOEQUALS":       `--env "NOEQUALS": want K=V`,
		"--file x":             `--file "x": want NAME=PATH`,
		"--max-output lots":    `--max-output: "lots" is not a positive size`,
		"--timeout 0s":         "--timeout must be positive",
		"--install-timeout 0s": "--install-timeout must be positive",
		"--stdin - -":          "--stdin - and code from - both want standard input",
	} {
		fl := strings.Fields(args)
		if fl[len(fl)-1] != "-" {
			fl = append(fl, "-c", "x")
		}
		o, err := parse(t, fl...)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if _, err := o.program(config.Default()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// runExec executes `rlm exec args` against the test plugins with in-memory
// streams and returns its output and exit status.
func runExec(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	f, out, errOut := factory(t, stdin)
	cmd := NewCmd(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	var ee *cmdutil.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.Code
		if ee.Err != nil {
			errOut.WriteString("error: " + ee.Err.Error() + "\n")
		}
	default:
		t.Fatalf("exec %q: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

func TestRun(t *testing.T) {
	// fakert declares no isolation level: --isolation none says running it
	// unsandboxed is meant, so exec does not warn (thirdparty/unsandboxed).
	out, errOut, code := runExec(t, "", "-r", "fakert", "--isolation", "none", "-c", "exit 3", "--arg", "a1", "--env", "K=V", "--timeout", "2s")
	if out != "code=exit 3 stdin= args=a1 wall=2000\nenv K=V\n" || errOut != "warn\n" || code != 3 {
		t.Errorf("got %q %q %d", out, errOut, code)
	}

	// A timeout is 124, and the reason follows the program's stderr.
	_, errOut, code = runExec(t, "", "-r", "fakert", "--isolation", "none", "-c", "timeout")
	if code != cmdutil.ExitTimeout || errOut != "warn\nrlm: timed out after 1s\n" {
		t.Errorf("timeout: %q %d", errOut, code)
	}

	// Code from standard input with -, and --json with the produced files.
	out, _, code = runExec(t, "from stdin", "-r", "fakert", "--json", "-")
	if code != 0 || !strings.Contains(out, `"runtime": "fakert"`) || !strings.Contains(out, `"stdout": "code=from stdin stdin= args= wall=30000\n"`) ||
		!strings.Contains(out, `"path": "out/result.txt"`) {
		t.Errorf("--json: %d %s", code, out)
	}
}

func TestRunOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "produced")
	if _, _, code := runExec(t, "", "-r", "fakert", "-c", "x", "--out", dir); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "result.txt")); err != nil || string(b) != "result\n" {
		t.Errorf("--out: %q %v", b, err)
	}
}

func TestRunCheck(t *testing.T) {
	if out, _, code := runExec(t, "", "-r", "fakert", "--check", "-c", "fine"); out != "ok\n" || code != 0 {
		t.Errorf("check ok: %q %d", out, code)
	}
	if out, errOut, code := runExec(t, "", "-r", "fakert", "--check", "-c", "bad"); out != "" || errOut != "line 1: bad syntax\n" || code != cmdutil.ExitFailure {
		t.Errorf("check failed: %q %q %d", out, errOut, code)
	}
	if out, _, code := runExec(t, "", "-r", "fakert", "--check", "--json", "-c", "bad"); !strings.Contains(out, `"ok": false`) || code != cmdutil.ExitFailure {
		t.Errorf("check --json: %q %d", out, code)
	}
}

// What would otherwise be the plugin's failure is caught first: an
// unavailable runtime (127), an unknown one and a --file clashing with the
// code file (usage, 2).
func TestRunRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-r", "downrt", "-c", "x"}, cmdutil.ExitNoRuntime, "runtime downrt is not available here: 'down' not found in PATH"},
		{[]string{"-r", "nosuch", "-c", "x"}, cmdutil.ExitUsage, `unknown runtime "nosuch"`},
		{[]string{"-r", "fakert", "-c", "x", "--file", "main.fk=/dev/null"}, cmdutil.ExitUsage, "--file main.fk clashes with the code file"},
		{[]string{"-r", "fakert", "-c", "x", "--backend", "nope"}, cmdutil.ExitUsage, `unknown backend "nope"`},
	} {
		out, errOut, code := runExec(t, "", c.args...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
}
