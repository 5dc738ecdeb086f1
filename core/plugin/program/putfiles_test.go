package program

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
)

func TestPutFilesWritesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	if err := PutFiles(dir, []core.File{{Path: "a.txt", Data: []byte("one")}, {Path: "d/e/b.bin", Data: []byte{0, 1}, Mode: 0o600}}, nil); err != nil {
		t.Fatal(err)
	}
	// a second upload replaces, through a hard link too without writing the
	// other name's content
	if err := os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "other.txt")); err != nil {
		t.Fatal(err)
	}
	if err := PutFiles(dir, []core.File{{Path: "./a.txt", Data: []byte("two")}}, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.txt": "two", "other.txt": "one", "d/e/b.bin": "\x00\x01"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	if st, _ := os.Stat(filepath.Join(dir, "d/e/b.bin")); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".rlm-put-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// Every step that creates something goes through createAs (a sandbox's
// directory may take only entries of its own user's).
func TestPutFilesCreatesThroughCreateAs(t *testing.T) {
	dir := t.TempDir()
	n := 0
	as := func(create func() error) error {
		n++
		return create()
	}
	if err := PutFiles(dir, []core.File{{Path: "d/e/f", Data: []byte("x")}, {Path: "d/g", Data: []byte("y")}}, as); err != nil {
		t.Fatal(err)
	}
	if n != 6 { // d, d/e, then a temporary file and its rename for each
		t.Fatalf("createAs ran %d times, want 6", n)
	}
	refuse := func(func() error) error { return os.ErrPermission }
	if err := PutFiles(dir, []core.File{{Path: "h", Data: []byte("x")}}, refuse); err == nil {
		t.Fatal("a refused create was not an error")
	}
}

func TestPutFilesRefusesEscapes(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Mkdir(filepath.Join(dir, "in"), 0o755)
	os.Symlink("in", filepath.Join(dir, "inlink"))
	os.Symlink(filepath.Join(outside, "f"), filepath.Join(dir, "flink"))
	os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644)
	for _, c := range []struct{ name, want string }{
		{"../up", "contains '..'"},
		{"a/../../up", "contains '..'"},
		{"/etc/passwd", "absolute"},
		{"", "empty"},
		{".", "working directory itself"},
		{"out/f", "out is a symlink"},
		{"inlink/f", "inlink is a symlink"},
		{"flink", "is a symlink"},
		{"in", "is a directory"},
		{"plain/f", "plain is not a directory"},
	} {
		err := PutFiles(dir, []core.File{{Path: c.name, Data: []byte("x")}}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.name, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("wrote outside: %v", entries)
	}
}

func TestSnapshotProduced(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "old.txt"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(dir, "same.txt"), []byte("s"), 0o644)
	snap := TakeSnapshot(dir)
	time.Sleep(10 * time.Millisecond) // distinct mtimes on coarse filesystems
	os.WriteFile(filepath.Join(dir, "old.txt"), []byte("ab"), 0o644)
	os.MkdirAll(filepath.Join(dir, "n"), 0o755)
	os.WriteFile(filepath.Join(dir, "n/new.txt"), []byte("new"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	files, omitted := snap.Produced(dir, core.Limits{})
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = f.Change + ":" + string(f.Data)
	}
	if omitted || len(got) != 2 || got["old.txt"] != "modified:ab" || got["n/new.txt"] != "created:new" {
		t.Fatalf("files %v omitted %v", got, omitted)
	}
	if files, omitted := snap.Produced(dir, core.Limits{MaxFiles: 1}); len(files) != 1 || !omitted {
		t.Fatalf("bounded: %d files, omitted %v", len(files), omitted)
	}
}
