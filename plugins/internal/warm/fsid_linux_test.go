package warm

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// TestAsOwnerKeepsTheIdentityToItsThreads: files asOwner's jobs create
// belong to the identity, and files every other goroutine creates
// meanwhile, on however many threads, still belong to the host's root.
func TestAsOwnerKeepsTheIdentityToItsThreads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setfsuid to another user needs root")
	}
	const uid, gid = 54321, 54322
	// Not below t.TempDir: its parent is closed to other users.
	dir, err := os.MkdirTemp("", "asowner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	owner := func(path string) (int, int) {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return int(st.Uid), int(st.Gid)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 50 {
				p := filepath.Join(dir, "sandbox-"+strconv.Itoa(g)+"-"+strconv.Itoa(i))
				if err := asOwner(uid, gid, func() error { return os.WriteFile(p, nil, 0o600) }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := os.WriteFile(filepath.Join(dir, "host-"+strconv.Itoa(g)+"-"+strconv.Itoa(i)), nil, 0o600); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 800 {
		t.Fatalf("%d files, want 800", len(entries))
	}
	for _, e := range entries {
		u, g := owner(filepath.Join(dir, e.Name()))
		want := [2]int{0, 0}
		if e.Name()[:4] == "sand" {
			want = [2]int{uid, gid}
		}
		if [2]int{u, g} != want {
			t.Fatalf("%s belongs to %d:%d, want %d:%d", e.Name(), u, g, want[0], want[1])
		}
	}
}
