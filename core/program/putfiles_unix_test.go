//go:build unix

package program

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	pb "github.com/rlmkit/rlm/core/proto"
)

// Run as root, what PutFiles creates in a directory of another user's (a
// root caller's sandbox runs as uid 65534) becomes that user's.
func TestPutFilesGivesToTheDirectorysOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := t.TempDir()
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := PutFiles(dir, []*pb.File{{Path: "sub/f", Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"sub", "sub/f"} {
		st, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 65534 || s.Gid != 65534 {
			t.Errorf("%s owned by %d:%d", n, s.Uid, s.Gid)
		}
	}
}
