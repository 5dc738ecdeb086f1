package servecmd

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
	"github.com/rlmkit/rlm/internal/testutil"
	"github.com/rlmkit/rlm/plugins/python"
)

// TestMain doubles as the python plugin, launched under its name.
func TestMain(m *testing.M) {
	plugintest.Main(m, map[string]func(){"python": python.Main})
}

// hermetic points every plugin and tool search at directories this test
// controls; it returns a plugin directory holding rlm-plugin-python.
func hermetic(t *testing.T) (pluginDir, emptyPath string) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	t.Setenv("RLM_PLUGIN_PATH", "")
	t.Setenv("RLM_CONFIG", "")
	for _, k := range []string{"RLM_MODE", "SANDBOX_MODE", "RLM_MAX_CONCURRENT", "SANDBOX_MAX_CONCURRENT", "RLM_TOKEN", "RLM_ADDR"} {
		t.Setenv(k, "")
	}
	pluginDir = t.TempDir()
	plugintest.LinkPlugins(t, pluginDir, "python")
	return pluginDir, t.TempDir()
}

func runServe(ctx context.Context, t *testing.T, pluginDirs []string, args ...string) (string, error) {
	var errOut testutil.SyncBuffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: &errOut}, PluginDirs: pluginDirs}
	var o *Options
	cmd := NewCmd(f, func(opts *Options) error { o = opts; return nil })
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return "", err
	}
	err := Run(ctx, o)
	return errOut.String(), err
}

func TestStartErrors(t *testing.T) {
	pluginDir, emptyPath := hermetic(t)
	ctx := context.Background()

	_, err := runServe(ctx, t, []string{pluginDir}, "--mode", "ruby")
	var ee *cmdutil.ExitError
	if err == nil || !errors.As(err, &ee) || ee.Code != cmdutil.ExitUsage || !strings.Contains(err.Error(), `unknown mode "ruby"`) {
		t.Errorf("unknown mode: %v", err)
	}
	_, err = runServe(ctx, t, []string{pluginDir}, "--mode", "golang")
	if err == nil || !strings.HasPrefix(err.Error(), "mode=golang but ") {
		t.Errorf("a mode without its plugin: %v", err)
	}

	// The plugin is there, its tool is not.
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	t.Setenv("PATH", emptyPath)
	_, err = runServe(ctx, t, []string{pluginDir}, "--mode", "python")
	if err == nil || err.Error() != "mode=python but 'python3' not found in PATH" {
		t.Errorf("a mode whose runtime is missing: %v", err)
	}
	_, err = runServe(ctx, t, []string{pluginDir})
	if err == nil || !strings.Contains(err.Error(), "no runtime found (tried python, golang, node, shell)") ||
		!strings.Contains(err.Error(), "python: 'python3' not found in PATH") {
		t.Errorf("auto-detection with no runtime: %v", err)
	}
}

// The signal (ctx) with a run in flight past the grace period: the run is
// killed, the command returns nil (exit 0), and no plugin or program
// process is left.
func TestShutdownKillsRunsAfterGrace(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	pluginDir, _ := hermetic(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	var logs string
	go func() {
		var errOut testutil.SyncBuffer
		f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: &errOut}, PluginDirs: []string{pluginDir}}
		var o *Options
		cmd := NewCmd(f, func(opts *Options) error { o = opts; return nil })
		// process, not the default namespace: the test reads the program's
		// host pid from a host file.
		cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--grace", "300ms", "--log-format", "json", "--isolation", "process"})
		if err := cmd.Execute(); err != nil {
			errc <- err
			return
		}
		o.Ready = func(a string) { addrc <- a }
		err := Run(ctx, o)
		logs = errOut.String()
		errc <- err
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("serve did not start: %v", err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	code := `import os, time; open(` + strconv.Quote(pidFile) + `, "w").write(str(os.getpid())); time.sleep(60)`
	replied := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/execute", "application/json", strings.NewReader(`{"code": `+strconv.Quote(code)+`}`))
		if err != nil {
			replied <- -1
			return
		}
		resp.Body.Close()
		replied <- resp.StatusCode
	}()
	var pid int
	for deadline := time.Now().Add(20 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the program did not start")
		}
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(string(b))
	}
	plugins := testutil.Children("rlm-plugin-python")
	if len(plugins) != 1 {
		t.Fatalf("%d plugins running, want 1", len(plugins))
	}
	stop() // SIGTERM
	if err := <-errc; err != nil {
		t.Fatalf("serve returned %v after the signal; want nil (exit 0)", err)
	}
	if st := <-replied; st != 503 && st != -1 {
		t.Errorf("the killed run's client got %d", st)
	}
	// Reaping is asynchronous: give the kernel a moment before blaming.
	for _, p := range append(plugins, pid) {
		for deadline := time.Now().Add(5 * time.Second); proctree.Alive(p) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if proctree.Alive(p) {
			cl, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
			t.Errorf("process %d (%s) outlived the server", p, cl)
		}
	}
	for _, want := range []string{`"msg":"shutting down"`, `"msg":"grace period over; killing the runs still in flight"`, `"msg":"stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
}
