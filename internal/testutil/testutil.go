// Package testutil holds the helpers that the tests of several packages
// would otherwise each write again: a buffer safe to log into from many
// goroutines, a TestMain that builds binaries once for a package's tests,
// a look at this process's children, and running a check on many
// goroutines at once (Concurrently). Only tests import it; a plugin's
// own code never does, so plugins stay free of it.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlmkit/rlm/internal/sandbox/proctree"
)

// SyncBuffer is a bytes.Buffer that many goroutines may write to (a
// server's log) while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BuildMain is a TestMain for tests that run real binaries: it runs
// `go build -o DIR/ args...` (build flags, then packages, relative to the
// test's package directory) into a new temporary directory, sets *dir to
// it, runs the tests and removes the directory. Building once here, not
// in each test, keeps the compiler's time out of the tests; a failed
// build ends the test binary with the compiler's output.
func BuildMain(m *testing.M, dir *string, args ...string) {
	d, err := os.MkdirTemp("", "rlm-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := exec.Command("go", append([]string{"build", "-o", d + "/"}, args...)...).CombinedOutput()
	if err != nil {
		os.RemoveAll(d)
		fmt.Fprintf(os.Stderr, "building %s: %v\n%s", strings.Join(args, " "), err, out)
		os.Exit(1)
	}
	*dir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// Children lists the live (not zombie) children of this process whose
// command line holds pattern: the plugins a test launched, to check that
// they are gone or that one survived.
func Children(pattern string) []int {
	var out []int
	for pid, state := range proctree.Children() {
		if state == 'Z' || state == 'X' {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.Contains(cl, []byte(pattern)) {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}
