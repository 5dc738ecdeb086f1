//go:build linux

package wsfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

func setup(t *testing.T) (*FS, string, *[]string) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("fine"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "in.txt"), []byte("nested"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "abs"))
	os.Symlink("../../../../../etc", filepath.Join(dir, "reldir"))
	os.Symlink("sub", filepath.Join(dir, "inner"))
	var denied []string
	f, err := New(dir, func(op, p, reason string) { denied = append(denied, op+" "+p) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, dir, &denied
}

func read(t *testing.T, f *FS, p string) (string, experimentalsys.Errno) {
	t.Helper()
	fl, errno := f.OpenFile(p, experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		return "", errno
	}
	defer fl.Close()
	buf := make([]byte, 100)
	n, errno := fl.Read(buf)
	return string(buf[:n]), errno
}

func TestAllowed(t *testing.T) {
	f, dir, denied := setup(t)
	for p, want := range map[string]string{"ok.txt": "fine", "/ok.txt": "fine", "sub/in.txt": "nested", "sub/../ok.txt": "fine", "../../ok.txt": "fine"} {
		if got, errno := read(t, f, p); errno != 0 || got != want {
			t.Errorf("read %q = %q, %v", p, got, errno)
		}
	}
	fl, errno := f.OpenFile("made.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT|experimentalsys.O_TRUNC, 0o644)
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	fl.Write([]byte("abc"))
	fl.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "made.txt")); string(b) != "abc" {
		t.Fatalf("host sees %q", b)
	}
	if e := f.Mkdir("d", 0o755); e != 0 {
		t.Fatal(e)
	}
	if e := f.Rename("made.txt", "d/moved.txt"); e != 0 {
		t.Fatal(e)
	}
	if st, e := f.Stat("d/moved.txt"); e != 0 || st.Size != 3 {
		t.Fatalf("stat = %+v, %v", st, e)
	}
	if e := f.Unlink("d/moved.txt"); e != 0 {
		t.Fatal(e)
	}
	if e := f.Rmdir("d"); e != 0 {
		t.Fatal(e)
	}
	d, e := f.OpenFile(".", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if e != 0 {
		t.Fatal(e)
	}
	ents, e := d.Readdir(-1)
	d.Close()
	if e != 0 || len(ents) != 5 {
		t.Fatalf("readdir = %v, %v", ents, e)
	}
	if st, e := f.Lstat("abs"); e != 0 || st.Mode&os.ModeSymlink == 0 {
		t.Fatalf("lstat link = %v, %v", st.Mode, e)
	}
	if s, e := f.Readlink("abs"); e != 0 || s != "/etc/passwd" {
		t.Fatalf("readlink = %q, %v", s, e)
	}
	if len(*denied) != 0 {
		t.Fatalf("denied %v", *denied)
	}
}

func TestDenied(t *testing.T) {
	f, dir, denied := setup(t)
	for _, p := range []string{"abs", "reldir/passwd", "inner/in.txt", "inner"} {
		if got, errno := read(t, f, p); errno != experimentalsys.EPERM {
			t.Errorf("read %q = %q, %v; want EPERM", p, got, errno)
		}
	}
	if _, e := f.Stat("reldir"); e != experimentalsys.EPERM {
		t.Errorf("stat through link = %v", e)
	}
	if _, e := f.Lstat("reldir/passwd"); e != experimentalsys.EPERM {
		t.Errorf("lstat through link = %v", e)
	}
	if e := f.Symlink("/etc/passwd", "l"); e != experimentalsys.EPERM {
		t.Errorf("symlink = %v", e)
	}
	if e := f.Link("ok.txt", "h"); e != experimentalsys.EPERM {
		t.Errorf("link = %v", e)
	}
	if _, e := f.OpenFile("abs", experimentalsys.O_WRONLY|experimentalsys.O_TRUNC, 0); e != experimentalsys.EPERM {
		t.Errorf("write through link = %v", e)
	}
	if e := f.Chmod("abs", 0o777); e != experimentalsys.EPERM {
		t.Errorf("chmod through link = %v", e)
	}
	if e := f.Mkdir("reldir/x", 0o755); e != experimentalsys.EPERM {
		t.Errorf("mkdir through link = %v", e)
	}
	if e := f.Rename("ok.txt", "reldir/ok.txt"); e != experimentalsys.EPERM {
		t.Errorf("rename through link = %v", e)
	}
	if e := f.Utimens("abs", 0, 0); e != 0 {
		// AT_SYMLINK_NOFOLLOW: touches the link itself, allowed.
		t.Errorf("utimens on link = %v", e)
	}
	for _, p := range []string{"l", "h"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	if len(*denied) < 10 || !strings.HasPrefix((*denied)[0], "open ") {
		t.Errorf("denied events: %v", *denied)
	}
}

// A trailing slash demands a directory, as on Linux: path.Clean used to drop
// it, so "new/" was created as a file and "ok.txt/" opened.
func TestTrailingSlash(t *testing.T) {
	f, dir, _ := setup(t)
	create := experimentalsys.O_WRONLY | experimentalsys.O_CREAT | experimentalsys.O_TRUNC
	if _, e := f.OpenFile("sub/new/", create, 0o644); e != experimentalsys.EISDIR {
		t.Errorf("create sub/new/ = %v, want EISDIR", e)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub", "new")); err == nil {
		t.Error("sub/new was created")
	}
	if _, e := f.OpenFile("ok.txt/", create, 0o644); e != experimentalsys.ENOTDIR {
		t.Errorf("create ok.txt/ = %v, want ENOTDIR", e)
	}
	if _, e := read(t, f, "ok.txt/"); e != experimentalsys.ENOTDIR {
		t.Errorf("read ok.txt/ = %v, want ENOTDIR", e)
	}
	if _, e := f.Stat("ok.txt/"); e != experimentalsys.ENOTDIR {
		t.Errorf("stat ok.txt/ = %v, want ENOTDIR", e)
	}
	if _, e := f.Lstat("ok.txt/"); e != experimentalsys.ENOTDIR {
		t.Errorf("lstat ok.txt/ = %v, want ENOTDIR", e)
	}
	if e := f.Unlink("ok.txt/"); e != experimentalsys.ENOTDIR {
		t.Errorf("unlink ok.txt/ = %v, want ENOTDIR", e)
	}
	if e := f.Rename("ok.txt/", "moved"); e != experimentalsys.ENOTDIR {
		t.Errorf("rename ok.txt/ = %v, want ENOTDIR", e)
	}
	if e := f.Utimens("ok.txt/", 0, 0); e != experimentalsys.ENOTDIR {
		t.Errorf("utimens ok.txt/ = %v, want ENOTDIR", e)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ok.txt")); err != nil || string(b) != "fine" {
		t.Errorf("ok.txt changed: %q, %v", b, err)
	}
	// Positive controls: directories with a slash work.
	if st, e := f.Stat("sub/"); e != 0 || !st.Mode.IsDir() {
		t.Errorf("stat sub/ = %v, %v", st.Mode, e)
	}
	d, e := f.OpenFile("sub/", experimentalsys.O_RDONLY, 0)
	if e != 0 {
		t.Fatalf("open sub/ = %v", e)
	}
	d.Close()
	if e := f.Mkdir("made/", 0o755); e != 0 {
		t.Errorf("mkdir made/ = %v", e)
	}
	if e := f.Rename("made/", "made2/"); e != 0 {
		t.Errorf("rename made/ made2/ = %v", e)
	}
	if e := f.Rmdir("made2/"); e != 0 {
		t.Errorf("rmdir made2/ = %v", e)
	}
	// "inner" is a link to a directory: a slash would follow it, so refuse.
	if _, e := f.Stat("inner/"); e != experimentalsys.EPERM {
		t.Errorf("stat inner/ = %v, want EPERM", e)
	}
}
