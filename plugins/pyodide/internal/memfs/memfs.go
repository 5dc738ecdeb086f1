// Package memfs is a read-only fs.FS of a few in-memory files in one
// directory. It serves the standard-library zip and the sandbox's code file to
// the guest without touching the host file system, so neither can be changed
// by the guest nor seen by anything else.
package memfs

import (
	"archive/zip"
	"bytes"
	"io"
	"io/fs"
	"sort"
	"time"
)

// FS maps base names to contents. The zero value is an empty directory.
type FS map[string][]byte

var epoch = time.Unix(0, 0)

// Open implements fs.FS.
func (m FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		return &dir{m: m, names: names}, nil
	}
	b, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &file{Reader: bytes.NewReader(b), info: info{name: name, size: int64(len(b))}}, nil
}

type info struct {
	name string
	size int64
	dir  bool
}

func (i info) Name() string { return i.name }
func (i info) Size() int64  { return i.size }
func (i info) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i info) ModTime() time.Time         { return epoch }
func (i info) IsDir() bool                { return i.dir }
func (i info) Sys() any                   { return nil }
func (i info) Type() fs.FileMode          { return i.Mode().Type() }
func (i info) Info() (fs.FileInfo, error) { return i, nil }

// file implements fs.File, io.ReaderAt and io.Seeker so that wazero can serve
// pread and lseek (zipimport seeks to the central directory).
type file struct {
	*bytes.Reader
	info fs.FileInfo
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }

type dir struct {
	m     FS
	names []string
	pos   int
}

func (d *dir) Stat() (fs.FileInfo, error) { return info{name: ".", dir: true}, nil }
func (d *dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: fs.ErrInvalid}
}
func (d *dir) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.names[d.pos:]
	if n > 0 && len(rest) > n {
		rest = rest[:n]
	}
	if n > 0 && len(rest) == 0 {
		return nil, io.EOF
	}
	out := make([]fs.DirEntry, len(rest))
	for i, name := range rest {
		out[i] = info{name: name, size: int64(len(d.m[name]))}
	}
	d.pos += len(rest)
	return out, nil
}

// Zip serves the contents of a zip archive as a read-only tree. Each file is
// inflated on open, so the guest gets a seekable file and Python's own
// zipimport (pure Python, which parses the whole central directory at every
// start) is not needed: the path finder lists a directory in C instead.
type Zip struct{ r *zip.Reader }

// NewZip opens the archive b.
func NewZip(b []byte) (*Zip, error) {
	return NewZipAt(bytes.NewReader(b), int64(len(b)))
}

// NewZipAt opens the archive of size bytes that r reads. Only the central
// directory is read now; a file is read when the guest opens it. r must allow
// concurrent ReadAt calls.
func NewZipAt(r io.ReaderAt, size int64) (*Zip, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, err
	}
	return &Zip{r: zr}, nil
}

// Open implements fs.FS.
func (z *Zip) Open(name string) (fs.File, error) {
	f, err := z.r.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		return f, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return &file{Reader: bytes.NewReader(b), info: st}, nil
}
