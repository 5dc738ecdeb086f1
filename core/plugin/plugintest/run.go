package plugintest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

// Programs are the snippets CheckRun runs, written in the runtime's own
// language. Each is one whole program.
type Programs struct {
	// Hello writes "hello" and a newline to stdout and "oops" to stderr,
	// then exits 0.
	Hello string
	// Exit3 exits with status 3 without printing.
	Exit3 string
	// Echo copies standard input to stdout, then writes the value of the
	// environment variable RLM_CHECK and a newline.
	Echo string
	// WriteFile writes "data" (no newline) to out.txt in its working
	// directory.
	WriteFile string
	// Spin never ends by itself (a busy or sleeping loop).
	Spin string
}

// Runner runs one program the way the host does. The conformance holds for
// a plugin as the host sees it: pass a client.Runtime's Run of the launched
// plugin (or plugin.NewServer's, through the adapter), so that requests
// are checked as they would be in rlm.
type Runner func(ctx context.Context, p core.Program) (*core.Result, error)

// CheckRun is the contract every runtime's Run must keep, whatever its
// language: output and exit status as the program gave them, standard
// input and the request's environment delivered, produced files returned
// when asked for, the wall-clock limit ending a run as a timeout, and a
// malformed request refused (core.RefusedError) without running. The
// built-in runtimes pass it; a third party's plugin test calls it with
// its own Programs.
func CheckRun(t *testing.T, run Runner, p Programs) {
	t.Helper()
	ctx := context.Background()
	do := func(name string, prog core.Program) *core.Result {
		t.Helper()
		res, err := run(ctx, prog)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}

	res := do("Hello", core.Program{Code: p.Hello})
	if res.Stdout != "hello\n" || !strings.Contains(res.Stderr, "oops") || res.ExitCode != 0 || res.EndedBy != ending.Exit {
		t.Errorf("Hello: stdout %q stderr %q exit %d ended_by %q; want \"hello\\n\", oops, 0, exit", res.Stdout, res.Stderr, res.ExitCode, res.EndedBy)
	}

	res = do("Exit3", core.Program{Code: p.Exit3})
	if res.ExitCode != 3 || res.EndedBy != ending.Exit || res.TimedOut {
		t.Errorf("Exit3: exit %d ended_by %q timed_out %v; want 3, exit, false", res.ExitCode, res.EndedBy, res.TimedOut)
	}

	res = do("Echo", core.Program{Code: p.Echo, Stdin: []byte("from stdin\n"), Env: map[string]string{"RLM_CHECK": "from env"}})
	if res.Stdout != "from stdin\nfrom env\n" || res.ExitCode != 0 {
		t.Errorf("Echo: stdout %q exit %d; want \"from stdin\\nfrom env\\n\", 0", res.Stdout, res.ExitCode)
	}

	res = do("WriteFile", core.Program{Code: p.WriteFile, ReturnFiles: true})
	var got []string
	for _, f := range res.Files {
		got = append(got, f.Path+"="+string(f.Data))
	}
	if res.ExitCode != 0 || !strings.Contains(strings.Join(got, ","), "out.txt=data") {
		t.Errorf("WriteFile: exit %d files %q; want out.txt holding \"data\"", res.ExitCode, got)
	}

	start := time.Now()
	res = do("Spin", core.Program{Code: p.Spin, Limits: core.Limits{Wall: time.Second}})
	if res.EndedBy != ending.Timeout || !res.TimedOut {
		t.Errorf("Spin under a 1 s limit: ended_by %q timed_out %v; want timeout", res.EndedBy, res.TimedOut)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("Spin under a 1 s limit took %v", d)
	}

	var refused *core.RefusedError
	_, err := run(ctx, core.Program{Code: p.Hello, Env: map[string]string{"BAD NAME": "1"}})
	if !errors.As(err, &refused) || refused.Kind != core.Invalid || !strings.Contains(err.Error(), "BAD NAME") {
		t.Errorf("an environment name no program can receive: error %v; want a core.RefusedError (Invalid) naming it", err)
	}
	_, err = run(ctx, core.Program{Code: p.Hello, Files: []core.File{{Path: "../escape", Data: []byte("x")}}})
	if !errors.As(err, &refused) || refused.Kind != core.Invalid {
		t.Errorf("a file outside the working directory: error %v; want a core.RefusedError (Invalid)", err)
	}
}
