// Package config loads rlm.toml. Precedence is flag > environment > file >
// default; commands apply their flags on top of what Load returns.
//
// Unknown keys are errors naming the key and the file: a misspelt limit that
// silently does nothing is worse than a refusal.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is the whole file. Every key here is documented in
// rlm.toml.example; a test keeps the two in step.
type Config struct {
	// Runtime is the default runtime for exec.
	Runtime string `toml:"runtime" env:"RLM_RUNTIME"`
	// Backend is auto, daemon, native or pyodide.
	Backend string `toml:"backend" env:"RLM_BACKEND"`
	// PluginDirs are searched for rlm-plugin-* after --plugin-dir and
	// $RLM_PLUGIN_PATH.
	PluginDirs []string `toml:"plugin_dirs"`
	Limits     Limits   `toml:"limits"`
	Daemon     Daemon   `toml:"daemon"`
}

// Daemon configures `rlm daemon` and how clients find it.
type Daemon struct {
	// Socket is the daemon's Unix socket (a named pipe on Windows); ""
	// means ~/.rlm/daemon.sock (\\.\pipe\rlm-daemon).
	Socket string `toml:"socket" env:"RLM_DAEMON_SOCKET"`
	// Workers is the number of warm sessions kept per pooled runtime.
	Workers int `toml:"workers" env:"RLM_DAEMON_WORKERS"`
	// Runtimes get warm sessions and a plugin started with the daemon.
	Runtimes []string `toml:"runtimes" env:"RLM_DAEMON_RUNTIMES"`
	// DrainTimeout is how long a stopping daemon lets running requests
	// finish before it cuts them off.
	DrainTimeout Duration `toml:"drain_timeout"`
}

// Limits are the defaults for exec and sessions.
type Limits struct {
	Timeout   Duration `toml:"timeout" env:"RLM_TIMEOUT"`
	MaxOutput Size     `toml:"max_output" env:"RLM_MAX_OUTPUT"`
}

// Default is the configuration with no file and no environment.
func Default() Config {
	return Config{
		Runtime:    "python",
		Backend:    "auto",
		PluginDirs: []string{},
		Limits: Limits{
			Timeout:   Duration(30 * time.Second),
			MaxOutput: 1 << 20,
		},
		Daemon: Daemon{
			Workers:      2,
			Runtimes:     []string{"python"},
			DrainTimeout: Duration(10 * time.Second),
		},
	}
}

// Error is a configuration problem, with where it came from.
type Error struct {
	Source string // file path or environment variable
	Key    string
	Msg    string
}

func (e *Error) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("%s: %s: %s", e.Source, e.Key, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Source, e.Msg)
}

// Find returns the config file to use: explicit (from --config), then
// $RLM_CONFIG, ./rlm.toml, ~/.rlm/rlm.toml. An explicit path that does not
// exist is an error; absent defaults are not.
func Find(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", &Error{Source: explicit, Msg: "cannot read config file: " + errText(err)}
		}
		return explicit, nil
	}
	if p := os.Getenv("RLM_CONFIG"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", &Error{Source: "RLM_CONFIG=" + p, Msg: "cannot read config file: " + errText(err)}
		}
		return p, nil
	}
	for _, p := range SearchPaths() {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", nil
}

// SearchPaths are the implicit config locations, in order.
func SearchPaths() []string {
	out := []string{"rlm.toml"}
	if home, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(home, ".rlm", "rlm.toml"))
	}
	return out
}

func errText(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "no such file"
	}
	return err.Error()
}

// Load reads the file (path may be "" for none), then the environment, over
// the defaults.
func Load(path string) (Config, error) {
	c := Default()
	if path != "" {
		md, err := toml.DecodeFile(path, &c)
		if err != nil {
			var perr toml.ParseError
			if errors.As(err, &perr) {
				return c, &Error{Source: path, Msg: fmt.Sprintf("line %d: %s", perr.Position.Line, perr.Message)}
			}
			return c, &Error{Source: path, Msg: err.Error()}
		}
		if und := md.Undecoded(); len(und) > 0 {
			keys := make([]string, len(und))
			for i, k := range und {
				keys[i] = k.String()
			}
			return c, &Error{Source: path, Key: keys[0], Msg: "unknown key (see rlm.toml.example for the keys that exist)" + more(keys)}
		}
	}
	if err := applyEnv(reflect.ValueOf(&c).Elem()); err != nil {
		return c, err
	}
	return c, c.validate(path)
}

func more(keys []string) string {
	if len(keys) == 1 {
		return ""
	}
	return fmt.Sprintf("; also unknown: %s", strings.Join(keys[1:], ", "))
}

func (c Config) validate(path string) error {
	src := path
	if src == "" {
		src = "environment"
	}
	switch c.Backend {
	case "auto", "daemon", "native", "pyodide":
	default:
		return &Error{Source: src, Key: "backend", Msg: fmt.Sprintf("%q is not a backend: use auto, daemon, native or pyodide", c.Backend)}
	}
	if c.Runtime == "" {
		return &Error{Source: src, Key: "runtime", Msg: "must not be empty"}
	}
	if c.Daemon.Workers < 0 || c.Daemon.Workers > 64 {
		return &Error{Source: src, Key: "daemon.workers", Msg: fmt.Sprintf("%d is out of range: use 0 to 64", c.Daemon.Workers)}
	}
	return nil
}

// applyEnv sets every field tagged env:"NAME" from the environment.
func applyEnv(v reflect.Value) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f, fv := t.Field(i), v.Field(i)
		if f.Type.Kind() == reflect.Struct {
			if err := applyEnv(fv); err != nil {
				return err
			}
			continue
		}
		name := f.Tag.Get("env")
		if name == "" {
			continue
		}
		raw, ok := os.LookupEnv(name)
		if !ok || raw == "" {
			continue
		}
		if err := setFromString(fv, raw); err != nil {
			return &Error{Source: "environment", Key: name, Msg: err.Error()}
		}
	}
	return nil
}

func setFromString(fv reflect.Value, raw string) error {
	switch fv.Addr().Interface().(type) {
	case *Duration:
		d, err := ParseDuration(raw)
		fv.SetInt(int64(d))
		return err
	case *Size:
		n, err := ParseSize(raw)
		fv.SetInt(n)
		return err
	}
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(raw)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", raw)
		}
		fv.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("%q is not true or false", raw)
		}
		fv.SetBool(b)
	case reflect.Float64:
		n, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", raw)
		}
		fv.SetFloat(n)
	case reflect.Slice:
		fv.Set(reflect.ValueOf(strings.Split(raw, ",")))
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}

// TOML renders c as a TOML document (for `rlm config show`).
func (c Config) TOML() (string, error) {
	var b strings.Builder
	err := toml.NewEncoder(&b).Encode(c)
	return b.String(), err
}
