package cmdutil

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/isolate"
)

func apply(t *testing.T, auto bool, args ...string) (core.Limits, error) {
	t.Helper()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	l := LimitFlags{Auto: auto}
	l.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var got core.Limits
	err := l.Apply(config.Default().Limits, &got)
	return got, err
}

func TestLimitFlagsOverConfig(t *testing.T) {
	got, err := apply(t, false)
	if err != nil {
		t.Fatal(err)
	}
	def := config.Default().Limits
	if got.Isolation != def.Isolation || got.MemoryBytes != int64(def.Memory) || got.MaxProcesses != def.MaxProcesses {
		t.Errorf("defaults not taken from config: %+v", got)
	}
	got, err = apply(t, false, "--isolation", "none", "--memory", "64MiB", "--max-processes", "8", "--max-disk", "1MiB", "--cpu", "2s", "--allow-network")
	if err != nil {
		t.Fatal(err)
	}
	want := core.Limits{Isolation: "none", MemoryBytes: 64 << 20, MaxProcesses: 8, MaxDiskBytes: 1 << 20, CPU: 2 * time.Second, AllowNetwork: true}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	got, err = apply(t, false, "--memory", "0")
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
		{[]string{"--isolation", "auto"}, "auto is for rlm serve"},
		{[]string{"--memory", "lots"}, `--memory: "lots" is not a size`},
		{[]string{"--max-disk", "-1"}, "--max-disk"},
		{[]string{"--max-processes", "-3"}, "must not be negative"},
		{[]string{"--cpu", "-1s"}, "must not be negative"},
	} {
		_, err := apply(t, false, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestLimitFlagsAutoIsStrongest(t *testing.T) {
	got, err := apply(t, true, "--isolation", "auto")
	if err != nil {
		t.Fatal(err)
	}
	if got.Isolation != string(isolate.Strongest()) {
		t.Errorf("auto gave %q, want %q", got.Isolation, isolate.Strongest())
	}
}
