package proctree

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestChildrenAndKillOrphans(t *testing.T) {
	tracked := exec.Command("sleep", "30")
	Configure(tracked)
	if err := Start(tracked); err != nil {
		t.Fatal(err)
	}
	defer func() { KillGroup(tracked.Process.Pid); tracked.Wait(); Untrack(tracked.Process.Pid) }()
	orphan := exec.Command("sleep", "31")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	kids := Children()
	if _, ok := kids[tracked.Process.Pid]; !ok {
		t.Fatalf("tracked child %d not listed in %v", tracked.Process.Pid, kids)
	}
	if _, ok := kids[orphan.Process.Pid]; !ok {
		t.Fatalf("untracked child %d not listed in %v", orphan.Process.Pid, kids)
	}
	if n := KillOrphans(nil); n < 1 {
		t.Fatalf("killed %d", n)
	}
	kids = Children()
	if _, ok := kids[orphan.Process.Pid]; ok {
		t.Fatal("untracked child survived")
	}
	if _, ok := kids[tracked.Process.Pid]; !ok {
		t.Fatal("tracked child was killed")
	}
}

// KillTree ends a process's group, its descendants and, by their
// environment mark, what left the group with setsid and lost its parent
// (a double fork); Reap waits them out.
func TestKillTreeFindsEscapees(t *testing.T) {
	const mark = "RLM_PROCTREE_TEST=" + "tree1"
	sh := exec.Command("sh", "-c", `(setsid sleep 42 & echo $!); sleep 41 & wait`)
	sh.Env = append(os.Environ(), mark)
	Configure(sh)
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	var escapee int
	if _, err := fmt.Fscan(out, &escapee); err != nil {
		t.Fatal(err)
	}
	// wait until the escapee has left the group and its parent has exited
	escaped := func() bool {
		st, _ := stat(escapee)
		return st.pgid == escapee && !descendants(sh.Process.Pid, "")[escapee]
	}
	for deadline := time.Now().Add(5 * time.Second); !escaped(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("escapee %d never left the group and its parent", escapee)
		}
	}
	if !descendants(sh.Process.Pid, mark)[escapee] {
		t.Fatal("the escapee is not found by its mark")
	}
	killed := KillTree(sh.Process.Pid, mark)
	_ = sh.Wait()
	if !killed[escapee] || len(killed) < 2 {
		t.Fatalf("killed %v, want the escapee %d and the group's sleep", killed, escapee)
	}
	all := maps.Clone(killed)
	Reap(killed, 2*time.Second)
	for pid := range all {
		if Alive(pid) {
			t.Errorf("process %d survived", pid)
		}
	}
}
