// Package testutil holds the helpers that the tests of several packages
// would otherwise each write again: a buffer safe to log into from many
// goroutines and a look at this process's children. Only tests import it; a plugin's
// own code never does, so plugins stay free of it.
package testutil

import (
	"bytes"
	"os"
	"sort"
	"strconv"
	"sync"

	"github.com/rlmkit/rlm/internal/proctree"
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
