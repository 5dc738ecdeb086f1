package program

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/rlmkit/rlm/core"
)

// PutFiles writes files into dir, a working directory a program may be
// using meanwhile (a REPL session's, between cells). Unlike WriteFiles, a
// file replaces one of the same name: it is written beside it and renamed
// over it, so the program never reads half a file and no link is written
// through. Parent directories are created as needed.
//
// Names must pass core.CleanName, and no component of a path may be a symlink,
// whether or not it points inside dir (an error naming it; a directory
// where the file should go is one too). The writes go through os.Root, so a
// link the program swaps in meanwhile cannot lead them out of dir either.
//
// createAs, when not nil, runs each step that creates, renames or removes
// a file or directory (see isolate.Cmd.CreateAs: a sandbox whose directory
// takes only entries of its own user's); nil runs them as this process.
//
// Files are written in order; on an error the earlier ones stay.
func PutFiles(dir string, files []core.File, createAs func(create func() error) error) error {
	if createAs == nil {
		createAs = func(create func() error) error { return create() }
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening the working directory: %w", err)
	}
	defer root.Close()
	for _, f := range files {
		if err := putFile(root, f, createAs); err != nil {
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
				return fmt.Errorf("file %q: the working directory is full (its disk limit is reached); the file was not written", f.Path)
			}
			return err
		}
	}
	return nil
}

func putFile(root *os.Root, f core.File, createAs func(func() error) error) error {
	name, err := core.CleanName(f.Path)
	if err != nil {
		return err
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("file %q: %s", f.Path, fmt.Sprintf(format, args...))
	}
	failErr := func(err error) error { return fmt.Errorf("file %q: %w", f.Path, err) }
	parts := strings.Split(name, "/")
	cur := ""
	for _, part := range parts[:len(parts)-1] {
		cur = path.Join(cur, part)
		st, err := root.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := createAs(func() error { return root.Mkdir(cur, 0o755) }); err != nil && !errors.Is(err, fs.ErrExist) {
				return failErr(err)
			}
		case err != nil:
			return failErr(err)
		case st.Mode()&fs.ModeSymlink != 0:
			return fail("%s is a symlink; refusing to follow it", cur)
		case !st.IsDir():
			return fail("%s is not a directory", cur)
		}
	}
	if st, err := root.Lstat(name); err == nil {
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			return fail("it is a symlink in the working directory; refusing to follow it (remove it first)")
		case st.IsDir():
			return fail("it is a directory in the working directory")
		}
	}
	mode := f.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(name), ".rlm-put-"+hex.EncodeToString(rnd[:]))
	var fh *os.File
	err = createAs(func() (err error) {
		fh, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		return err
	})
	if err != nil {
		return failErr(err)
	}
	_, err = fh.Write(f.Data)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// a rename into a directory is a create too (a user-namespace
		// tmpfs refuses it from an unmapped uid)
		err = createAs(func() error { return root.Rename(tmp, name) })
	}
	if err != nil {
		_ = createAs(func() error { return root.Remove(tmp) })
		return failErr(err)
	}
	return nil
}
