package servecmd

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/config"
)

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	ios, _, _ := cmdutil.TestIO("")
	got, err := cmdutil.ParseFlags(&cmdutil.Factory{IO: ios}, NewCmd, args...)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestFlagsOverConfig(t *testing.T) {
	o := parse(t, "--addr", "127.0.0.1:9", "--mode", "python,shell", "--max-concurrent", "3", "--queue", "0",
		"--queue-wait", "2s", "--body-limit", "1MiB", "--max-timeout", "1m", "--token", "t", "--session-idle", "1m",
		"--max-sessions", "5", "--warm-sessions", "0", "--grace", "1s", "--log-format", "json")
	s, b, err := o.settings(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	want := config.Serve{Addr: "127.0.0.1:9", Mode: "python,shell", MaxConcurrent: 3, Queue: 0,
		QueueWait: config.Duration(2 * time.Second), BodyLimit: 1 << 20, MaxTimeout: config.Duration(time.Minute),
		Token: "t", AllowUnsandboxed: []string{}, SessionIdle: config.Duration(time.Minute), MaxSessions: 5, Grace: config.Duration(time.Second), LogFormat: "json", Isolation: "auto"}
	if !reflect.DeepEqual(s, want) || b != "native" {
		t.Errorf("got %+v %s\nwant %+v", s, b, want)
	}
}

func TestEnvironmentPrecedence(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rlm.toml")
	os.WriteFile(p, []byte("[serve]\nmode = \"shell\"\nmax_concurrent = 7\n"), 0o644)
	t.Setenv("RLM_MODE", "")
	t.Setenv("RLM_MAX_CONCURRENT", "")
	t.Setenv("SANDBOX_MODE", "node")
	t.Setenv("SANDBOX_MAX_CONCURRENT", "3")
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := parse(t).settings(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != "node" || s.MaxConcurrent != 3 {
		t.Errorf("SANDBOX_ variables should beat the file: %+v", s)
	}
	t.Setenv("RLM_MODE", "golang")
	t.Setenv("RLM_MAX_CONCURRENT", "4")
	cfg, _ = config.Load(p)
	s, _, _ = parse(t).settings(cfg)
	if s.Mode != "golang" || s.MaxConcurrent != 4 {
		t.Errorf("RLM_ variables should beat SANDBOX_ ones: %+v", s)
	}
	s, _, _ = parse(t, "--mode", "python").settings(cfg)
	if s.Mode != "python" {
		t.Errorf("the flag should beat the environment: %+v", s)
	}
	t.Setenv("RLM_MODE", "")
	t.Setenv("SANDBOX_MAX_CONCURRENT", "lots")
	t.Setenv("RLM_MAX_CONCURRENT", "")
	if _, _, err := parse(t).settings(cfg); err == nil || !strings.Contains(err.Error(), "SANDBOX_MAX_CONCURRENT") {
		t.Errorf("bad SANDBOX_MAX_CONCURRENT: %v", err)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--log-format", "xml"}, {"--body-limit", "huge"}, {"--queue", "-1"}, {"--grace", "0s"}, {"--max-sessions", "0"}, {"--warm-sessions", "-1"}, {"--backend", "warp"},
	} {
		if _, _, err := parse(t, args...).settings(config.Default()); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// A malformed --addr is named as such, not taken for a public address
// that lacks a token.
func TestBadAddr(t *testing.T) {
	for addr, want := range map[string]string{
		"garbage":         `--addr: "garbage" is not a listen address: use HOST:PORT, such as 127.0.0.1:8080`,
		"127.0.0.1:99999": `--addr: "127.0.0.1:99999": port 99999 is out of range`,
		"":                "--addr: the listen address is empty",
	} {
		_, _, err := parse(t, "--addr", addr).settings(config.Default())
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "token") {
			t.Errorf("--addr %q: got %v, want %q", addr, err, want)
		}
	}
}
