package pyodide

import (
	"io/fs"
	"path/filepath"
	"sort"
	"syscall"
)

// fileState identifies a version of a workspace file. Size, modification time
// (nanoseconds), inode and change time together catch any write the guest can
// make: even a same-size rewrite within one mtime tick changes ctime, and a
// replace-by-rename changes the inode.
type fileState struct {
	size      int64
	mtime     int64
	ctime     int64
	ino       uint64
	isSymlink bool
}

// snapshot records every regular file and symbolic link under dir, by
// slash-separated relative path. Links are recorded, never followed.
func snapshot(dir string) (map[string]fileState, error) {
	m := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // vanished or unreadable: not the guest's doing to report
		}
		if d.IsDir() {
			return nil
		}
		t := d.Type()
		if !t.IsRegular() && t&fs.ModeSymlink == 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil
		}
		st := fileState{size: info.Size(), mtime: info.ModTime().UnixNano(), isSymlink: t&fs.ModeSymlink != 0}
		if s, ok := info.Sys().(*syscall.Stat_t); ok {
			st.ino = s.Ino
			st.ctime = s.Ctim.Nano()
		}
		m[filepath.ToSlash(rel)] = st
		return nil
	})
	return m, err
}

// delta lists files present after but not before (created) and files whose
// state changed (modified). Deleted files are not reported.
func delta(before, after map[string]fileState) (created, modified []string) {
	for p, a := range after {
		b, ok := before[p]
		switch {
		case !ok:
			created = append(created, p)
		case a != b:
			modified = append(modified, p)
		}
	}
	sort.Strings(created)
	sort.Strings(modified)
	return created, modified
}
