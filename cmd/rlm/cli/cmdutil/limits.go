package cmdutil

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/config"
)

// LimitFlags are the sandbox flags exec, run and serve share, so all of
// them spell, default and validate them the same way: flag > environment >
// config. The isolation stays as asked (auto too): only the runtime's
// plugin, through client.Runtime, knows which level auto becomes.
type LimitFlags struct {
	Isolation    string
	Memory       string
	MaxProcesses int64
	MaxDisk      string
	CPU          time.Duration
	AllowNetwork bool

	fs *pflag.FlagSet
}

// Register adds the flags to fs.
func (l *LimitFlags) Register(fs *pflag.FlagSet) {
	l.fs = fs
	fs.StringVar(&l.Isolation, "isolation", "", "sandbox of the code: auto (the strongest this host and the runtime's plugin both support), none, process or namespace (default from config: auto)")
	fs.StringVar(&l.Memory, "memory", "", "memory limit, e.g. 256MiB (default from config: 1GiB; 0: none)")
	fs.Int64Var(&l.MaxProcesses, "max-processes", 0, "processes the code may run at once (default from config: 256; 0: none)")
	fs.StringVar(&l.MaxDisk, "max-disk", "", "total size the working directory may grow to, e.g. 64MiB (default under namespace: 1GiB or half of --memory, whichever is smaller; under process it needs root and defaults to none)")
	fs.DurationVar(&l.CPU, "cpu", 0, "CPU time limit, whole seconds, e.g. 10s (default: none)")
	fs.BoolVar(&l.AllowNetwork, "allow-network", false, "keep the host network under --isolation namespace")
}

func (l *LimitFlags) changed(name string) bool { return l.fs != nil && l.fs.Changed(name) }

// Apply sets dst's isolation and resource limits from the flags over cfg.
// Its errors are usage errors.
func (l *LimitFlags) Apply(cfg config.Limits, dst *core.Limits) error {
	dst.Isolation = cfg.Isolation
	dst.MemoryBytes = int64(cfg.Memory)
	dst.MaxProcesses = cfg.MaxProcesses
	dst.MaxDiskBytes = int64(cfg.MaxDisk)
	dst.CPU = time.Duration(cfg.CPU)
	if l.changed("isolation") {
		switch l.Isolation {
		case "auto", "none", "process", "namespace":
			dst.Isolation = l.Isolation
		default:
			return fmt.Errorf("--isolation: %q is not a level: use auto, none, process or namespace", l.Isolation)
		}
	}
	if l.changed("memory") {
		n, err := config.ParseSize(l.Memory)
		if err != nil || n < 0 {
			return fmt.Errorf("--memory: %q is not a size (e.g. 256MiB, or 0 for no limit)", l.Memory)
		}
		dst.MemoryBytes = n
	}
	if l.changed("max-processes") {
		if l.MaxProcesses < 0 {
			return fmt.Errorf("--max-processes must not be negative (0 means no limit)")
		}
		dst.MaxProcesses = l.MaxProcesses
	}
	if l.changed("max-disk") {
		n, err := config.ParseSize(l.MaxDisk)
		if err != nil || n < 0 {
			return fmt.Errorf("--max-disk: %q is not a size (e.g. 64MiB, or 0 for no limit)", l.MaxDisk)
		}
		dst.MaxDiskBytes = n
	}
	if l.changed("cpu") {
		if l.CPU < 0 {
			return fmt.Errorf("--cpu must not be negative (0 means no limit)")
		}
		dst.CPU = l.CPU
	}
	dst.AllowNetwork = l.AllowNetwork
	// Limits given as flags must hold: core refuses to run them at a level
	// that does not enforce them (isolation none, pyodide's wasm for
	// --max-disk), naming each. The configuration's are defaults.
	dst.Strict = 0
	for _, name := range core.AllResources.Names() {
		if l.changed(name) {
			dst.Strict |= core.ResourceNamed(name)
		}
	}
	return nil
}
