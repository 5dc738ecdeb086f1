// Command rlm-plugin-shrepl is a complete third-party runtime with REPL
// sessions: a POSIX shell that keeps its variables from cell to cell, can
// ask the host's model with llm_query, and runs inside rlm's sandbox at the
// level the session asks for (namespace where the host has it).
// docs/plugins.md walks through it; testscripts/testdata/thirdparty/
// session_plugin.txtar builds it as a module of its own and drives it
// through rlm exec --context, rlm serve's sessions and the daemon.
//
// The protocol with the shell is lines on its standard streams: a cell is
// written to its stdin, wrapped so that it ends with a line
// "\x1eEND <status>", and a call of llm_query writes "\x1eQUERY <prompt>" on
// the shell's fd 3 (its original stdout, even inside $(...)) and reads the
// answer as one line from stdin.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/native"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

const (
	endMark   = "\x1eEND "
	queryMark = "\x1eQUERY "
)

// prelude runs once in each interpreter: fd 3 keeps the pipe to the plugin,
// and llm_query asks through it.
const prelude = `exec 3>&1
llm_query() { printf '\036QUERY %s\n' "$*" >&3; IFS= read -r __rlm_answer; printf '%s\n' "$__rlm_answer"; }
`

// server is native's program runner plus OpenSession: the plugin has
// programs (sh FILE) and sessions.
type server struct{ *native.Server }

var runtime = &native.Runtime{
	Name: "shrepl", Version: "1.0.0", Language: "sh", Ext: ".shr", CodeFile: "main.sh",
	Tool: "sh", Probe: toolpath.VersionLine("-c", "echo POSIX sh"),
	Capabilities: []string{"program", "repl"},
	// The levels this runtime's sessions can run at: Info announces those
	// the host enforces, and the host picks among them (auto: the
	// strongest).
	SessionLevels: []isolation.Level{isolation.None, isolation.Process, isolation.Namespace},
}

// OpenSession implements plugin.Sessions.
func (s server) OpenSession(ctx context.Context, open core.SessionOptions) (*plugin.Session, error) {
	in, err := s.StartInterpreter(ctx, open, native.InterpreterOptions{Argv: []string{"/bin/sh"}})
	if err != nil {
		return nil, err
	}
	r := &repl{in: in, out: bufio.NewReader(in.Stdout)}
	if _, err := in.Stdin.Write([]byte(prelude)); err != nil {
		in.Close()
		return nil, err
	}
	return &plugin.Session{
		REPL:           r,
		RuntimeVersion: "POSIX sh",
		Options:        plugin.SessionOptions{Isolation: string(in.Level), Dir: func() string { return in.Dir }},
		Close:          in.Close,
	}, nil
}

// repl runs one cell at a time in the interpreter.
type repl struct {
	in  *native.Interpreter
	out *bufio.Reader
	mu  sync.Mutex
}

// Execute implements plugin.REPL.
func (r *repl) Execute(ctx context.Context, code string, timeout time.Duration, cb plugin.CallbackFunc) (*core.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// The interpreter is killed on a timeout: its state is gone, and the
	// result says so.
	stop := context.AfterFunc(ctx, r.in.Kill)
	defer stop()
	cell := fmt.Sprintf("{\n%s\n} 2>&1\nprintf '\\n\\036END %%s\\n' \"$?\"\n", code)
	if _, err := r.in.Stdin.Write([]byte(cell)); err != nil {
		return r.lost(ctx, "", start), nil
	}
	var out strings.Builder
	for {
		line, err := r.out.ReadString('\n')
		if err != nil {
			return r.lost(ctx, out.String(), start), nil
		}
		switch {
		case strings.HasPrefix(line, endMark):
			status, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, endMark)))
			text := strings.TrimSuffix(out.String(), "\n") // the newline before the mark
			return &core.Result{Stdout: text, ExitCode: status, EndedBy: "exit",
				DurationMs: time.Since(start).Milliseconds()}, nil
		case strings.HasPrefix(line, queryMark):
			prompt := strings.TrimSuffix(strings.TrimPrefix(line, queryMark), "\n")
			answer := "error: no model answers this cell"
			if cb != nil {
				if answers, err := cb(ctx, core.Query{Kind: "llm_query", Prompts: []string{prompt}}); err != nil {
					answer = "error: " + err.Error()
				} else if len(answers) == 1 {
					answer = answers[0]
				}
			}
			// One line: the shell reads the answer with read -r.
			answer = strings.ReplaceAll(answer, "\n", " ")
			if _, err := r.in.Stdin.Write([]byte(answer + "\n")); err != nil {
				return r.lost(ctx, out.String(), start), nil
			}
		default:
			out.WriteString(line)
		}
	}
}

// lost is the result of a cell whose interpreter died: by its timeout, or
// of its own accord.
func (r *repl) lost(ctx context.Context, out string, start time.Time) *core.Result {
	res := &core.Result{Stdout: out, ExitCode: -1, StateLost: true, EndedBy: "crashed",
		Error: "the shell exited; the session's state is lost", DurationMs: time.Since(start).Milliseconds()}
	if ctx.Err() != nil {
		res.EndedBy, res.TimedOut, res.Error = "timeout", true, "the cell ran out of time; the shell was killed and the session's state is lost"
	}
	return res
}

// Variable implements plugin.REPL: a shell variable, as a JSON string.
func (r *repl) Variable(ctx context.Context, name string) (bool, string, error) {
	res, err := r.Execute(ctx, fmt.Sprintf(`if [ -n "${%[1]s+set}" ]; then printf 'set:%%s' "$%[1]s"; fi`, name), 5*time.Second, nil)
	if err != nil || !strings.HasPrefix(res.Stdout, "set:") {
		return false, "", err
	}
	b, _ := json.Marshal(strings.TrimPrefix(res.Stdout, "set:"))
	return true, string(b), nil
}

// Interrupt implements plugin.REPL. A shell cannot be interrupted between
// the plugin's lines without losing its place: it is killed.
func (r *repl) Interrupt() error {
	r.in.Kill()
	return nil
}

func main() { native.Serve(server{native.New(runtime)}) }
