package proctree

import (
	"os/exec"
	"testing"
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
