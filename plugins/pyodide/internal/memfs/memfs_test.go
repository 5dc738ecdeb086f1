package memfs

import (
	"archive/zip"
	"bytes"
	"io"
	"io/fs"
	"testing"
	"testing/fstest"
)

func TestFS(t *testing.T) {
	m := FS{"a.txt": []byte("hello"), "b": nil}
	if err := fstest.TestFS(m, "a.txt", "b"); err != nil {
		t.Fatal(err)
	}
}

func TestZip(t *testing.T) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, body := range map[string]string{"os.pyc": "OS", "encodings/__init__.pyc": "ENC", "encodings/utf_8.pyc": "U8"} {
		f, _ := w.Create(name)
		f.Write([]byte(body))
	}
	w.Close()
	z, err := NewZip(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(z, "os.pyc", "encodings/__init__.pyc", "encodings/utf_8.pyc"); err != nil {
		t.Fatal(err)
	}
	f, err := z.Open("encodings/utf_8.pyc")
	if err != nil {
		t.Fatal(err)
	}
	// Seekable, so the guest can lseek and pread.
	s, ok := f.(io.ReadSeeker)
	if !ok {
		t.Fatal("zip file is not seekable")
	}
	s.Seek(1, io.SeekStart)
	b, _ := io.ReadAll(s)
	if string(b) != "8" {
		t.Fatalf("read %q", b)
	}
	if _, err := z.Open("nope.pyc"); err == nil {
		t.Fatal("opened a missing file")
	}
	if _, err := fs.ReadDir(z, "encodings"); err != nil {
		t.Fatal(err)
	}
	if _, err := NewZip([]byte("PK")); err == nil {
		t.Fatal("garbage accepted")
	}
}
