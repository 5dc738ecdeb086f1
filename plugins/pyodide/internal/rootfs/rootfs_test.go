package rootfs

import (
	"bytes"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

func TestRoot(t *testing.T) {
	r := New("/app", "/usr/local/lib/python3.11")
	for _, p := range []string{"x", "etc/passwd", "usr/bin", "dev/sda"} {
		if _, e := r.Stat(p); e != experimentalsys.ENOENT {
			t.Errorf("stat %s = %v, want ENOENT", p, e)
		}
		if _, e := r.OpenFile(p, experimentalsys.O_RDONLY, 0); e != experimentalsys.ENOENT {
			t.Errorf("open %s = %v, want ENOENT", p, e)
		}
	}
	for _, p := range []string{".", "/", "dev", "usr/local/lib", "app"} {
		if st, e := r.Stat(p); e != 0 || !st.Mode.IsDir() {
			t.Errorf("stat %s = %v, %v; want a directory", p, st.Mode, e)
		}
	}
	d, e := r.OpenFile("usr/local/lib", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if e != 0 {
		t.Fatal(e)
	}
	ents, e := d.Readdir(-1)
	d.Close()
	if e != 0 || len(ents) != 1 || ents[0].Name != "python3.11" {
		t.Errorf("readdir usr/local/lib = %v, %v", ents, e)
	}
	if _, e := r.OpenFile("new", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644); e != experimentalsys.EROFS {
		t.Errorf("create = %v, want EROFS", e)
	}
	if e := r.Mkdir("tmp", 0o755); e != experimentalsys.EROFS {
		t.Errorf("mkdir = %v, want EROFS", e)
	}
	if e := r.Mkdir("dev", 0o755); e != experimentalsys.EEXIST {
		t.Errorf("mkdir dev = %v, want EEXIST", e)
	}
	if e := r.Unlink("dev/null"); e != experimentalsys.EROFS {
		t.Errorf("unlink dev/null = %v, want EROFS", e)
	}
	if e := r.Unlink("nothing"); e != experimentalsys.ENOENT {
		t.Errorf("unlink nothing = %v, want ENOENT", e)
	}
	if _, e := r.Stat("dev/null/"); e != experimentalsys.ENOTDIR {
		t.Errorf("stat dev/null/ = %v, want ENOTDIR", e)
	}

	null, e := r.OpenFile("dev/null", experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_TRUNC, 0o666)
	if e != 0 {
		t.Fatal(e)
	}
	if n, e := null.Write([]byte("gone")); n != 4 || e != 0 {
		t.Errorf("write /dev/null = %d, %v", n, e)
	}
	buf := make([]byte, 8)
	if n, e := null.Read(buf); n != 0 || e != 0 {
		t.Errorf("read /dev/null = %d, %v; want end of file", n, e)
	}
	null.Close()
	u, e := r.OpenFile("dev/urandom", experimentalsys.O_RDONLY, 0)
	if e != 0 {
		t.Fatal(e)
	}
	a, b := make([]byte, 32), make([]byte, 32)
	u.Read(a)
	u.Read(b)
	if bytes.Equal(a, b) || bytes.Equal(a, make([]byte, 32)) {
		t.Errorf("urandom gave %x then %x", a, b)
	}
	if st, e := u.Stat(); e != 0 || st.Mode.IsDir() || st.Mode.IsRegular() {
		t.Errorf("urandom stat = %v, %v; want a device", st.Mode, e)
	}
}
