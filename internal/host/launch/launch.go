// Package launch starts runtime plugins for the host: it finds their
// binaries on the plugin search path, starts each in a process group and a
// private socket directory, completes go-plugin's handshake and turns its
// failures into errors a user can act on. Plugins never import it (they use
// core/plugin), so they link none of the sandbox code it reaches for.
package launch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// Plugin is a running plugin process and its runtime client.
type Plugin struct {
	Path   string
	Client pb.RuntimeClient

	gp      *goplugin.Client
	cmd     *exec.Cmd
	stderr  *tailWriter
	sockDir string
	once    sync.Once
}

// Launch starts the plugin binary at path and completes the handshake.
//
// The plugin runs in its own process group and is told by the kernel to die
// with this process (Pdeathsig), so neither a crash of the host nor a plugin
// that ignores the graceful shutdown leaves it running (go-plugin #136, #167).
func Launch(path string) (*Plugin, error) { return LaunchWithin(path, 20*time.Second) }

// LaunchWithin is Launch with a bound on the handshake: a caller that only
// fingerprints plugins (`rlm plugins`) gives up on a hanging one sooner.
func LaunchWithin(path string, start time.Duration) (*Plugin, error) {
	// The plugin's socket goes in a directory this process owns and
	// removes, so a plugin killed with SIGKILL (the fast path, and the only
	// one when it hangs) leaves no socket file behind in /tmp.
	sweepOnce.Do(sweepStaleDirs)
	sockDir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", sockDirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	}
	// Traversable but not listable: a namespace sandbox started by root runs
	// as uid 65534 and must reach its private working directory below here.
	// The socket itself is not writable by others, so they cannot connect.
	if err := os.Chmod(sockDir, 0o711); err != nil {
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	}
	cmd := exec.Command(path)
	proctree.Configure(cmd)
	ownMountNamespace(cmd)
	// The plugin's own temporary files (workspaces, session directories)
	// go there too: a plugin killed mid-run cannot clean up after itself,
	// and this process removes the directory whatever happened.
	cmd.Env = append(os.Environ(), goplugin.EnvUnixSocketDir+"="+sockDir, "TMPDIR="+sockDir)
	cmd.Env = append(cmd.Env, pb.PluginEnv(os.Getenv("GODEBUG"))...)
	tail := &tailWriter{max: 8 << 10}
	gp := goplugin.NewClient(&goplugin.ClientConfig{
		// cmd.Env holds the host's environment already. Without this,
		// go-plugin appends os.Environ() after it, and a TMPDIR set in the
		// host's environment would override the one above: a plugin killed
		// mid-run would then leave its workspaces in $TMPDIR.
		SkipHostEnv:      true,
		HandshakeConfig:  pb.Handshake,
		VersionedPlugins: pb.VersionedPlugins(nil),
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hostLogger(),
		Stderr:           tail,
		GRPCDialOptions:  pb.DialOptions(),
		StartTimeout:     start,
	})
	p := &Plugin{Path: path, gp: gp, cmd: cmd, stderr: tail, sockDir: sockDir}
	rpc, err := gp.Client()
	if err != nil {
		p.Kill()
		if strings.Contains(strings.ToLower(err.Error()), "timeout while waiting for plugin to start") {
			return nil, fmt.Errorf("plugin %s: did not complete its handshake within %s", path, start)
		}
		return nil, p.startError(err)
	}
	if p.Client, err = pb.Dispense(rpc); err != nil {
		p.Kill()
		return nil, p.startError(err)
	}
	return p, nil
}

func (p *Plugin) startError(err error) error {
	msg := err.Error()
	// go-plugin's wording varies in case between versions.
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "incompatible api version"):
		msg = fmt.Sprintf("speaks another protocol version (%s); this rlm speaks version %d: update the plugin or rlm", firstLine(msg), pb.ProtocolVersion)
	case strings.Contains(lower, "unrecognized remote plugin message"):
		// The first stdout line, which should have been the handshake.
		_, line, _ := strings.Cut(msg, "message:")
		line, _, _ = strings.Cut(strings.TrimLeft(line, " \t"), "\n")
		line = strings.TrimSpace(line)
		if line == "" {
			// Nothing on stdout at all: the plugin died (or exited)
			// before its handshake.
			msg = "exited before completing its handshake (a crash, or not an rlm plugin)"
		} else {
			msg = fmt.Sprintf("wrote to stdout before its handshake (%q); plugins must log to stderr", line)
		}
	case strings.Contains(lower, "exited before we could connect"):
		msg = "exited before completing its handshake (a crash, or not an rlm plugin)"
	}
	if s := strings.TrimSpace(p.stderr.String()); s != "" {
		msg += "\nplugin stderr:\n" + s
	}
	return fmt.Errorf("plugin %s failed to start: %s", p.Path, msg)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}

// Kill stops the plugin and everything in its process group at once. The
// graceful go-plugin shutdown is skipped: runtime plugins hold no state worth
// a goodbye, and waiting for it costs milliseconds on every command.
func (p *Plugin) Kill() {
	p.once.Do(func() {
		pid := 0
		if p.cmd.Process != nil {
			pid = p.cmd.Process.Pid
			proctree.KillGroup(pid)
		}
		p.gp.Kill()
		// Programs that left the plugin's process group (setsid) are still
		// in their run's cgroup when the plugin died mid-run, and a capped
		// working directory is still mounted below sockDir (its TMPDIR).
		isolate.ReapOwner(pid, p.sockDir)
		_ = os.RemoveAll(p.sockDir)
	})
}

// Exited reports whether the plugin process has ended (crashed or killed).
func (p *Plugin) Exited() bool { return p.gp.Exited() }

// Stderr is the tail of what the plugin wrote to stderr, for error reports.
func (p *Plugin) Stderr() string { return p.stderr.String() }

func hostLogger() hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("RLM_LOG_LEVEL"))
	if level == hclog.NoLevel {
		// go-plugin logs a plugin we killed on purpose as an error; every
		// failure that matters reaches the user as a returned error.
		level = hclog.Off
	}
	return hclog.New(&hclog.LoggerOptions{Name: "rlm", Level: level, Output: os.Stderr})
}

// tailWriter keeps the last max bytes written to it, except once a Go
// runtime crash report begins (a line starting "panic: " or "fatal error:
// "): from then on it keeps that report's first max bytes instead. A
// crash's traceback can list every goroutine; its head says what
// panicked and where, its tail only which goroutines were idle.
type tailWriter struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	crash   []byte // the crash report, once one began
	cut     bool   // the report was longer than max
	midLine bool   // the last write did not end a line
}

func (w *tailWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	if w.crash == nil && !w.midLine && (bytes.HasPrefix(b, []byte("panic: ")) || bytes.HasPrefix(b, []byte("fatal error: "))) {
		w.crash = make([]byte, 0, 1024)
	}
	if len(b) > 0 {
		w.midLine = b[len(b)-1] != '\n'
	}
	if w.crash != nil {
		room := w.max - len(w.crash)
		if len(b) > room {
			w.cut = true
			b = b[:max(room, 0)]
		}
		w.crash = append(w.crash, b...)
		return n, nil
	}
	w.buf = append(w.buf, b...)
	if len(w.buf) > w.max {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return n, nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.buf
	if w.crash != nil {
		out = w.crash
		if w.cut {
			out = append(out[:len(out):len(out)], "\n... (the rest of the crash report is left out)\n"...)
		}
	}
	return string(bytes.ToValidUTF8(out, nil))
}
