package cmdutil

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/config"
)

func apply(t *testing.T, args ...string) (core.Limits, error) {
	t.Helper()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var l LimitFlags
	l.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var got core.Limits
	err := l.Apply(config.Default().Limits, &got)
	return got, err
}

func TestLimitFlagsOverConfig(t *testing.T) {
	got, err := apply(t)
	if err != nil {
		t.Fatal(err)
	}
	def := config.Default().Limits
	if got.Isolation != def.Isolation || got.MemoryBytes != int64(def.Memory) || got.MaxProcesses != def.MaxProcesses {
		t.Errorf("defaults not taken from config: %+v", got)
	}
	got, err = apply(t, "--isolation", "none", "--memory", "64MiB", "--max-processes", "8", "--max-disk", "1MiB", "--cpu", "2s", "--allow-network")
	if err != nil {
		t.Fatal(err)
	}
	want := core.Limits{Isolation: "none", MemoryBytes: 64 << 20, MaxProcesses: 8, MaxDiskBytes: 1 << 20, CPU: 2 * time.Second, AllowNetwork: true, Strict: core.AllResources}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	got, err = apply(t, "--memory", "0")
	if err != nil || got.MemoryBytes != 0 {
		t.Errorf("--memory 0 should lift the cap: %+v %v", got, err)
	}
}

func TestLimitFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--isolation", "bogus"}, `"bogus" is not a level`},
		{[]string{"--memory", "lots"}, `--memory: "lots" is not a size`},
		{[]string{"--max-disk", "-1"}, "--max-disk"},
		{[]string{"--max-processes", "-3"}, "must not be negative"},
		{[]string{"--cpu", "-1s"}, "must not be negative"},
	} {
		_, err := apply(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// auto stays auto: only the runtime's plugin knows what it becomes
// (core.ResolveIsolation), and it is the default.
func TestLimitFlagsAutoIsLeftToTheRuntime(t *testing.T) {
	for _, args := range [][]string{nil, {"--isolation", "auto"}} {
		got, err := apply(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if got.Isolation != "auto" {
			t.Errorf("%v gave %q, want auto", args, got.Isolation)
		}
	}
}

// Only limits given as flags are strict; the configured defaults are not.
func TestLimitFlagsStrict(t *testing.T) {
	if got, _ := apply(t); got.Strict != 0 {
		t.Error("defaults marked strict")
	}
	if got, _ := apply(t, "--isolation", "none"); got.Strict != 0 {
		t.Error("--isolation alone marked strict")
	}
	if got, _ := apply(t, "--cpu", "1s"); got.Strict != core.CPULimit {
		t.Errorf("--cpu: strict %v, want cpu alone", got.Strict.Names())
	}
	// each flag marks its own limit, not the configured others
	if got, _ := apply(t, "--max-disk", "1MiB", "--memory", "0"); got.Strict != core.DiskLimit|core.MemoryLimit {
		t.Errorf("--max-disk --memory: strict %v", got.Strict.Names())
	}
}
