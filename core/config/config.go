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
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/rlmkit/rlm/core/defaults"
	"github.com/rlmkit/rlm/core/llm/pricing"
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
	// Run holds the defaults of `rlm run`.
	Run Run `toml:"run"`
	// Providers configure the model providers by name ([providers.openai]).
	Providers map[string]Provider `toml:"providers"`
	// Pricing adds or overrides model prices (USD per million tokens) in
	// core/llm's table, for cost accounting and max_cost_usd.
	Pricing map[string]pricing.Price `toml:"pricing"`
	// Sessions bounds the model calls of REPL sessions no loop drives
	// (serve, mcp, exec --context).
	Sessions Sessions `toml:"sessions"`
	// Serve configures `rlm serve`.
	Serve Serve `toml:"serve"`
	// Daemon configures `rlm daemon` and how clients find it.
	Daemon Daemon `toml:"daemon"`
}

// Run is the [run] table: the defaults of `rlm run`. Budgets of 0 are
// unlimited (except max_iterations, whose 0 means the engine default).
// Provider "" means anthropic for `rlm run` and no model for sessions:
// serve, mcp and exec give their sessions a model only when one is chosen
// (here, $RLM_PROVIDER or --provider), so that no server starts spending
// on a key it merely finds in its environment.
type Run struct {
	Provider       string   `toml:"provider" env:"RLM_PROVIDER"`
	Model          string   `toml:"model" env:"RLM_MODEL"`
	SubcallModel   string   `toml:"subcall_model" env:"RLM_SUBCALL_MODEL"`
	MaxIterations  int      `toml:"max_iterations"`
	MaxDepth       int      `toml:"max_depth"`
	MaxTokens      int64    `toml:"max_tokens"`
	MaxCostUSD     float64  `toml:"max_cost_usd"`
	MaxTime        Duration `toml:"max_time"`
	MaxErrors      int      `toml:"max_errors"`
	MaxOutputChars int      `toml:"max_output_chars"`
	MaxConcurrent  int      `toml:"max_concurrent"`
}

// Sessions is the [sessions] table: the budget of each REPL session's
// llm_query calls (rlm serve, rlm mcp, rlm exec --context) and the models
// a session may choose. Budgets of 0 are unlimited.
type Sessions struct {
	MaxTokens     int64   `toml:"max_tokens"`
	MaxCostUSD    float64 `toml:"max_cost_usd"`
	MaxCalls      int     `toml:"max_calls"`
	MaxCallTokens int     `toml:"max_call_tokens"`
	// AllowModels are the models besides the default one that a session
	// may choose (POST /sessions {"model"}, llm_query(p, model=...)).
	AllowModels []string `toml:"allow_models" env:"RLM_ALLOW_MODELS"`
}

// Provider is one [providers.NAME] table. Empty fields take the provider's
// own defaults (and the API key its environment variable).
type Provider struct {
	BaseURL    string   `toml:"base_url"`
	APIKey     string   `toml:"api_key"`
	Timeout    Duration `toml:"timeout"`
	MaxRetries int      `toml:"max_retries"`
	Transcript string   `toml:"transcript"`
	Command    string   `toml:"command"`
}

// Serve configures `rlm serve`. The earlier server's variables
// SANDBOX_MODE and SANDBOX_MAX_CONCURRENT are read by the command, below
// the RLM_ ones.
type Serve struct {
	// Addr is the listen address; loopback unless asked otherwise.
	Addr string `toml:"addr" env:"RLM_ADDR"`
	// Mode lists the runtimes to serve, comma-separated, the first being
	// the default; empty auto-detects python, golang, node, shell.
	Mode string `toml:"mode" env:"RLM_MODE"`
	// MaxConcurrent bounds runs in flight; 0 means the number of CPUs.
	MaxConcurrent int `toml:"max_concurrent" env:"RLM_MAX_CONCURRENT"`
	// Queue is how many requests may wait for a run slot.
	Queue int `toml:"queue" env:"RLM_QUEUE"`
	// QueueWait bounds one request's wait in the queue.
	QueueWait Duration `toml:"queue_wait" env:"RLM_QUEUE_WAIT"`
	// BodyLimit bounds a request body.
	BodyLimit Size `toml:"body_limit" env:"RLM_BODY_LIMIT"`
	// MaxTimeout caps a request's timeout.
	MaxTimeout Duration `toml:"max_timeout" env:"RLM_MAX_TIMEOUT"`
	// Token, when set, is required as a bearer token (not on /health).
	Token string `toml:"token" env:"RLM_TOKEN"`
	// AllowUnauthenticated lets serve listen on a non-loopback address
	// without a token. Off, such a server refuses to start: it would run
	// code for anyone who can reach it. Turn it on only when something in
	// front of rlm (a proxy, a private network) does the authentication.
	AllowUnauthenticated bool `toml:"allow_unauthenticated" env:"RLM_ALLOW_UNAUTHENTICATED"`
	// AllowUnsandboxed names the runtimes serve and mcp may enable although
	// their plugin can only run code at isolation none (as the user, network
	// on, host files readable). Without its name such a runtime is not
	// enabled: untrusted code must not run unsandboxed by accident.
	AllowUnsandboxed []string `toml:"allow_unsandboxed" env:"RLM_ALLOW_UNSANDBOXED"`
	// SessionIdle closes sessions unused this long.
	SessionIdle Duration `toml:"session_idle" env:"RLM_SESSION_IDLE"`
	// MaxSessions bounds open sessions.
	MaxSessions int `toml:"max_sessions" env:"RLM_MAX_SESSIONS"`
	// WarmSessions is how many sessions of each language are kept open
	// ahead of demand (0: none).
	WarmSessions int `toml:"warm_sessions" env:"RLM_WARM_SESSIONS"`
	// Grace is how long in-flight requests may finish after SIGTERM.
	Grace Duration `toml:"grace" env:"RLM_GRACE"`
	// LogFormat is text or json.
	LogFormat string `toml:"log_format" env:"RLM_LOG_FORMAT"`
	// Isolation is auto (the strongest level this host and each runtime's
	// plugin support), none, process or namespace; [limits] isolation
	// does not apply to a server.
	Isolation string `toml:"isolation" env:"RLM_SERVE_ISOLATION"`
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

// Limits are the defaults for exec, run and serve's programs and sessions.
type Limits struct {
	Timeout   Duration `toml:"timeout" env:"RLM_TIMEOUT"`
	MaxOutput Size     `toml:"max_output" env:"RLM_MAX_OUTPUT"`
	// Isolation is auto (the strongest level both this host and the
	// runtime's plugin support), none, process or namespace (see
	// internal/sandbox/isolate). serve uses [serve] isolation instead.
	Isolation string `toml:"isolation" env:"RLM_ISOLATION"`
	// Memory caps a run's memory (cgroup, else RLIMIT_DATA; the pyodide
	// backend's linear memory); 0 means no cap.
	Memory Size `toml:"memory" env:"RLM_MEMORY"`
	// MaxProcesses caps the processes a run may have at once; 0: no cap.
	MaxProcesses int64 `toml:"max_processes" env:"RLM_MAX_PROCESSES"`
	// MaxDisk caps the total size of a run's working directory (a tmpfs;
	// needs root) and of each file it writes; 0: no cap.
	MaxDisk Size `toml:"max_disk" env:"RLM_MAX_DISK"`
	// CPU caps a run's CPU time (RLIMIT_CPU, whole seconds); 0: no cap.
	CPU Duration `toml:"cpu" env:"RLM_CPU"`
}

// DefaultIsolation is the isolation of every path that runs code: auto, the
// strongest level the host and the plugin both support (namespace where
// bubblewrap works, else process; none off Linux), reported in each result.
const DefaultIsolation = "auto"

// Default is the configuration with no file and no environment.
func Default() Config {
	return Config{
		Runtime:    "python",
		Backend:    "auto",
		PluginDirs: []string{},
		Limits: Limits{
			Timeout:      Duration(defaults.Timeout),
			MaxOutput:    defaults.MaxOutputBytes,
			Isolation:    DefaultIsolation,
			Memory:       1 << 30,
			MaxProcesses: 256,
		},
		Sessions: Sessions{AllowModels: []string{}},
		Run: Run{
			MaxIterations:  20,
			MaxDepth:       1,
			MaxTime:        Duration(30 * time.Minute),
			MaxErrors:      5,
			MaxOutputChars: 20000,
			MaxConcurrent:  defaults.BatchConcurrency,
		},
		Providers: map[string]Provider{},
		Pricing:   map[string]pricing.Price{},
		Serve: Serve{
			AllowUnsandboxed: []string{},
			Addr:             "127.0.0.1:8080",
			Mode:             "",
			Queue:            64,
			QueueWait:        Duration(10 * time.Second),
			BodyLimit:        8 << 20,
			MaxTimeout:       Duration(5 * time.Minute),
			SessionIdle:      Duration(10 * time.Minute),
			MaxSessions:      64,
			WarmSessions:     2,
			Grace:            Duration(5 * time.Second),
			LogFormat:        "text",
			Isolation:        DefaultIsolation,
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
	if err := c.Limits.validate(src); err != nil {
		return err
	}
	if c.Daemon.Workers < 0 || c.Daemon.Workers > 64 {
		return &Error{Source: src, Key: "daemon.workers", Msg: fmt.Sprintf("%d is out of range: use 0 to 64", c.Daemon.Workers)}
	}
	return c.Serve.validate(src)
}

func (l Limits) validate(src string) error {
	if err := checkIsolation(src, "limits.isolation", l.Isolation); err != nil {
		return err
	}
	const noCap = "0 means no cap"
	return checkNonNegative(src,
		nonNegative{"limits.memory", int64(l.Memory), noCap},
		nonNegative{"limits.max_processes", l.MaxProcesses, noCap},
		nonNegative{"limits.max_disk", int64(l.MaxDisk), noCap},
		nonNegative{"limits.cpu", int64(l.CPU), noCap},
	)
}

func (s Serve) validate(src string) error {
	if err := checkIsolation(src, "serve.isolation", s.Isolation); err != nil {
		return err
	}
	if err := checkNonNegative(src,
		nonNegative{"serve.max_concurrent", int64(s.MaxConcurrent), "0 means the number of CPUs"},
		nonNegative{"serve.queue", int64(s.Queue), ""},
		nonNegative{"serve.max_sessions", int64(s.MaxSessions), ""},
		nonNegative{"serve.warm_sessions", int64(s.WarmSessions), "0 keeps none"},
	); err != nil {
		return err
	}
	if s.LogFormat != "text" && s.LogFormat != "json" {
		return &Error{Source: src, Key: "serve.log_format", Msg: fmt.Sprintf("%q is not a log format: use text or json", s.LogFormat)}
	}
	if err := CheckAddr(s.Addr); err != nil {
		if os.Getenv("RLM_ADDR") != "" {
			return &Error{Source: "environment", Key: "RLM_ADDR", Msg: err.Error()}
		}
		return &Error{Source: src, Key: "serve.addr", Msg: err.Error()}
	}
	return nil
}

// CheckAddr refuses a listen address that is not HOST:PORT with a port
// from 0 to 65535 (or a service name such as http). It runs before the
// server's other checks: the token check reads the host out of the
// address and, given "garbage", would complain of a missing token rather
// than of the address. The message says what is wrong and the form
// wanted; callers prefix where the address came from.
func CheckAddr(addr string) error {
	const form = "use HOST:PORT, such as 127.0.0.1:8080 or [::1]:8080"
	if addr == "" {
		return fmt.Errorf("the listen address is empty: %s", form)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not a listen address: %s", addr, form)
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 0 || n > 65535 {
			return fmt.Errorf("%q: port %d is out of range: use 0 to 65535 (0 picks a free port)", addr, n)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: %q is not a port: %s", addr, port, form)
	}
	return nil
}

// checkIsolation refuses an isolation level ([limits] or [serve]) that is
// not one of auto, none, process or namespace.
func checkIsolation(src, key, level string) error {
	switch level {
	case "auto", "none", "process", "namespace":
		return nil
	}
	return &Error{Source: src, Key: key, Msg: fmt.Sprintf("%q is not an isolation level: use auto, none, process or namespace", level)}
}

// nonNegative is a number that must not be below 0; zero, when set, says
// what 0 means.
type nonNegative struct {
	key  string
	n    int64
	zero string
}

// checkNonNegative refuses the first of fields that is negative.
func checkNonNegative(src string, fields ...nonNegative) error {
	for _, f := range fields {
		if f.n >= 0 {
			continue
		}
		msg := "must not be negative"
		if f.zero != "" {
			msg += " (" + f.zero + ")"
		}
		return &Error{Source: src, Key: f.key, Msg: msg}
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

// TOML renders c as a TOML document (for `rlm config show`). Secrets
// (API keys, serve.token) are shown as "(set)", never in clear.
func (c Config) TOML() (string, error) {
	if c.Serve.Token != "" {
		c.Serve.Token = "(set)"
	}
	if len(c.Providers) > 0 {
		ps := make(map[string]Provider, len(c.Providers))
		for k, p := range c.Providers {
			if p.APIKey != "" {
				p.APIKey = "(set)"
			}
			// The effective values, not the 0 that means "the default".
			if p.Timeout == 0 {
				p.Timeout = Duration(defaults.LLMTimeout)
			}
			if p.MaxRetries == 0 {
				p.MaxRetries = defaults.LLMMaxRetries
			}
			ps[k] = p
		}
		c.Providers = ps
	}
	var b strings.Builder
	err := toml.NewEncoder(&b).Encode(c)
	return b.String(), err
}
