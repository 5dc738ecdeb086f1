package warm

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// report is a fork server's stand-in: it says what it was given and what
// it holds, on stdout.
const report = `
import sys
def _report():
    try:
        os.fstat(4)
        fd4 = "open"
    except OSError:
        fd4 = "closed"
    try:
        os.waitpid(-1, os.WNOHANG)
        kids = "some"
    except ChildProcessError:
        kids = "none"
    anon = [l.split()[1] for l in open("/proc/self/status") if l.startswith("RssAnon:")][0]
    print(" ".join(sys.argv[1:]), __name__, sys._getframe().f_code.co_filename, fd4, kids, anon)
_report()
`

// compileHere is bootPy without its child: the server compiles its
// source itself.
const compileHere = `import os
src = []
while True:
    b = os.read(4, 1 << 16)
    if not b:
        break
    src.append(b)
os.close(4)
exec(compile(b"".join(src), "<rlm fork server>", "exec"))
`

// startReport runs src as a fork server is started (boot), or with
// compileHere, and returns its report.
func startReport(t *testing.T, exe, src string, boot bool) []string {
	t.Helper()
	chan3, err := os.Open(os.DevNull) // a fork server's channel
	if err != nil {
		t.Fatal(err)
	}
	defer chan3.Close()
	source, err := ForkServerSource(src)
	if err != nil {
		t.Fatal(err)
	}
	defer source.Close()
	argv := ForkServerArgv(exe, "one", "two")
	if !boot {
		argv[2] = compileHere
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{chan3, source}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	return strings.Fields(string(out))
}

// TestForkServerBoot: a fork server started by ForkServerArgv runs its
// source from ForkServerSourceFD as __main__ with its arguments, holds
// neither that descriptor nor the child that compiled the source, and
// holds less memory than a server that compiles its source itself (the
// parser's leftovers are the child's). The source is larger than a pipe's
// default 64 KiB, so ForkServerSource must grow its pipe.
func TestForkServerBoot(t *testing.T) {
	exe, _, err := FindPython()
	if err != nil {
		t.Skip("python3 not installed")
	}
	src := pyMain + report + strings.Repeat("# a comment to pass 64 KiB\n", 2600)
	if len(src) <= 64<<10 {
		t.Fatalf("the source is %d bytes: not beyond a pipe's default", len(src))
	}
	got := startReport(t, exe, src, true)
	want := []string{"one", "two", "__main__", "<rlm", "fork", "server>", "closed", "none"}
	if len(got) != len(want)+1 || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
		t.Fatalf("the fork server reported %q, want %q and its anonymous memory", got, want)
	}
	booted, _ := strconv.Atoi(got[len(want)])
	here := startReport(t, exe, src, false)
	if strings.Join(here[:len(want)], " ") != strings.Join(want, " ") {
		t.Fatalf("compileHere reported %q", here)
	}
	compiledHere, _ := strconv.Atoi(here[len(want)])
	t.Logf("anonymous memory: %d kB booted, %d kB compiled in the server", booted, compiledHere)
	if booted <= 0 || compiledHere-booted < 256 {
		t.Errorf("a booted fork server holds %d kB of anonymous memory, one that compiled its source %d: want at least 256 kB less", booted, compiledHere)
	}
}

// TestForkServerBootFails: a source that does not compile ends the fork
// server with an error that says so, and the code never runs.
func TestForkServerBootFails(t *testing.T) {
	exe, _, err := FindPython()
	if err != nil {
		t.Skip("python3 not installed")
	}
	source, err := ForkServerSource("print('ran')\ndef (:\n")
	if err != nil {
		t.Fatal(err)
	}
	defer source.Close()
	chan3, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer chan3.Close()
	argv := ForkServerArgv(exe)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{chan3, source}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil || len(out) != 0 || !strings.Contains(stderr.String(), "cannot compile its source: SyntaxError") {
		t.Fatalf("err %v, stdout %q, stderr %q: want a failure that names the SyntaxError, and nothing run", err, out, stderr.String())
	}
}
