package sandbox

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core"
)

func TestClean(t *testing.T) {
	for in, want := range map[string]string{"": ".", ".": ".", "./": ".", "a/b": "a/b", "a//b/": "a/b", "./a": "a"} {
		if got, err := Clean(in); err != nil || got != want {
			t.Errorf("Clean(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"../a": "contains '..'", "/etc": "is absolute", "a/../../b": "contains '..'"} {
		_, err := Clean(in)
		if ErrorKind(err) != Invalid || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "path ") {
			t.Errorf("Clean(%q) = %v; want an Invalid error saying %q", in, err, want)
		}
	}
}

// The helper is installed with the first call and not again; a cell that
// gives no answer (its interpreter died) is a Failed error saying how,
// and a refusal inside comes back with its kind.
func TestCallInstallsOnceAndDecodes(t *testing.T) {
	var cells []string
	answers := []*core.Result{
		{Stdout: "noise\n" + mark + `{"ok": {"pid": 7}}` + "\n"},
		{Stdout: mark + `{"error": {"kind": "not_found", "message": "x: No such file"}}` + "\n"},
		{ExitCode: 1, Error: "KeyboardInterrupt", EndedBy: "timeout"},
		{Stdout: mark + `{"ok": {"data": "AAAA`, StdoutOmitted: 5000},
	}
	box := New(func(_ context.Context, c core.Cell) (*core.Result, error) {
		cells = append(cells, c.Code)
		r := answers[0]
		answers = answers[1:]
		return r, nil
	})
	pid, err := box.Start(context.Background(), Command{Cmd: "true"})
	if err != nil || pid != 7 {
		t.Fatalf("Start = %d, %v", pid, err)
	}
	_, err = box.Stat(context.Background(), "x")
	if ErrorKind(err) != NotFound || err.Error() != "x: No such file" {
		t.Fatalf("Stat error = %v", err)
	}
	_, err = box.Stat(context.Background(), "y")
	if ErrorKind(err) != Failed || !strings.Contains(err.Error(), "KeyboardInterrupt") {
		t.Fatalf("a cell without an answer: %v", err)
	}
	_, err = box.ReadFile(context.Background(), "big", 1<<30)
	if ErrorKind(err) != Failed || !strings.Contains(err.Error(), "--max-output") {
		t.Fatalf("a cut answer: %v", err)
	}
	if !strings.Contains(cells[0], "_RlmSandbox") || strings.Contains(cells[1], "_RlmSandbox") {
		t.Fatalf("the helper should be installed by the first cell only:\n%.200s\n%.200s", cells[0], cells[1])
	}
	if _, err := box.Start(context.Background(), Command{}); ErrorKind(err) != Invalid {
		t.Fatalf("an empty command: %v", err)
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]string{"": "SIGKILL", "TERM": "SIGTERM", "sigint": "SIGINT", "SIGUSR1": "SIGUSR1", "15": "15"} {
		if got, ok := ParseSignal(in); !ok || got != want {
			t.Errorf("ParseSignal(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"bogus", "SIGFOO", "0", "99", "-9"} {
		if _, ok := ParseSignal(in); ok {
			t.Errorf("ParseSignal(%q) accepted", in)
		}
	}
}

// TestSpoolOfAKilledREPLIsSwept: a REPL killed with its session (no atexit
// runs) leaves its command-output spool in the host's temporary directory
// (isolation process or none); the next helper to start removes it, and
// keeps the spools of REPLs still alive.
func TestSpoolOfAKilledREPLIsSwept(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	tmp := t.TempDir()
	start := func() (*exec.Cmd, string) {
		cmd := exec.Command(py, "-c", installCode()+"print(__rlm_sandbox.spool, flush=True)\nimport time\ntime.sleep(600)")
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return cmd, strings.TrimSpace(line)
	}
	killed, first := start()
	_, alive := start()
	killed.Process.Kill()
	killed.Wait()
	if _, err := os.Stat(first); err != nil {
		t.Fatalf("the killed REPL's spool %s: %v", first, err)
	}
	_, third := start()
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("the killed REPL's spool %s is still there (%v)", first, err)
	}
	for _, d := range []string{alive, third} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("a live REPL's spool %s: %v", d, err)
		}
	}
}
