package program

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core"
)

// WriteFiles puts the request's files into dir. Parent directories are
// created as needed; a name whose parent is not a plain directory (say, a
// symlink planted by an earlier file) is refused.
func WriteFiles(dir string, files []core.File) error {
	for _, f := range files {
		name, err := core.CleanName(f.Path)
		if err != nil {
			return err
		}
		full := filepath.Join(dir, filepath.FromSlash(name))
		if err := mkdirNoSymlink(dir, filepath.Dir(full)); err != nil {
			return fmt.Errorf("file %q: %w", f.Path, err)
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		fh, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, mode)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("file %q is given twice or clashes with the program file", f.Path)
			}
			return fmt.Errorf("file %q: %w", f.Path, err)
		}
		_, err = fh.Write(f.Data)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("file %q: %w", f.Path, err)
		}
	}
	return nil
}

// mkdirNoSymlink creates target (inside root) refusing to walk through any
// symlink on the way.
func mkdirNoSymlink(root, target string) error {
	rel, err := filepath.Rel(root, target)
	if err != nil || rel == "." {
		return err
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		st, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil {
				return err
			}
		case err != nil:
			return err
		case st.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink; refusing to follow it", part)
		case !st.IsDir():
			return fmt.Errorf("%s is not a directory", part)
		}
	}
	return nil
}

// snapshot records what a directory held before the run, to tell created
// from modified files afterwards.
type snapshot map[string]fileStamp

type fileStamp struct {
	size  int64
	mtime time.Time
}

func takeSnapshot(dir string) snapshot {
	s := snapshot{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			rel, _ := filepath.Rel(dir, p)
			s[filepath.ToSlash(rel)] = fileStamp{info.Size(), info.ModTime()}
		}
		return nil
	})
	return s
}

// Snapshot is what a working directory held at one moment, for Produced to
// tell what changed since: a REPL session takes one before each cell.
type Snapshot struct{ files snapshot }

// TakeSnapshot records the regular files under dir now.
func TakeSnapshot(dir string) Snapshot { return Snapshot{takeSnapshot(dir)} }

// Produced returns the regular files under dir created or changed since the
// snapshot, with their content, exactly as a program's produced files are
// (Workspace.Finish): symlinks never followed, at most l.MaxFiles files
// (DefaultMaxFiles when 0) of at most l.MaxFileBytes (DefaultMaxFile) each;
// omitted says some were left out. dir is normally the directory the
// snapshot was taken of (a sandbox that moved a session's working directory
// to a fresh copy passes the copy).
func (s Snapshot) Produced(dir string, l core.Limits) (files []core.File, omitted bool) {
	return produced(dir, s.files, nil, l)
}

// produced is collect within l's bounds, of the host's directory dir.
func produced(dir string, before snapshot, skip map[string]bool, l core.Limits) ([]core.File, bool) {
	return producedIn(os.DirFS(dir), func(rel string, max int64) ([]byte, error) {
		return readNoFollow(filepath.Join(dir, filepath.FromSlash(rel)), max)
	}, before, skip, l)
}

// producedIn is collect within l's bounds, of the directory fsys lists and
// read reads (never following a symlink).
func producedIn(fsys fs.FS, read func(rel string, max int64) ([]byte, error), before snapshot, skip map[string]bool, l core.Limits) ([]core.File, bool) {
	maxFiles := int(l.MaxFiles)
	if maxFiles <= 0 {
		maxFiles = DefaultMaxFiles
	}
	maxFile := l.MaxFileBytes
	if maxFile <= 0 {
		maxFile = DefaultMaxFile
	}
	return collect(fsys, read, before, skip, maxFiles, maxFile, maxFile*int64(maxFiles))
}

// Collect returns the regular files in fsys created or changed since
// before, skipping the names in skip. Symlinks are never followed or
// returned. At most maxFiles files and maxBytes bytes in all come back,
// each file at most maxFile bytes; the rest sets omitted.
func collect(fsys fs.FS, read func(rel string, max int64) ([]byte, error), before snapshot, skip map[string]bool, maxFiles int, maxFile, maxBytes int64) (files []core.File, omitted bool) {
	type cand struct {
		rel    string
		size   int64
		change string
	}
	var cands []cand
	_ = fs.WalkDir(fsys, ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if skip[rel] {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		old, existed := before[rel]
		switch {
		case !existed:
			cands = append(cands, cand{rel, info.Size(), "created"})
		case old.size != info.Size() || !old.mtime.Equal(info.ModTime()):
			cands = append(cands, cand{rel, info.Size(), "modified"})
		}
		return nil
	})
	sort.Slice(cands, func(i, j int) bool { return cands[i].rel < cands[j].rel })
	var total int64
	for _, c := range cands {
		if len(files) >= maxFiles || c.size > maxFile || total+c.size > maxBytes {
			omitted = true
			continue
		}
		data, err := read(c.rel, maxFile)
		if err != nil {
			omitted = true
			continue
		}
		total += int64(len(data))
		files = append(files, core.File{Path: c.rel, Data: data, Size: int64(len(data)), Change: c.change})
	}
	return files, omitted
}

func readNoFollow(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	return readAtMost(f, max)
}

// readAtMost reads f whole, closing it, unless it holds more than max bytes.
func readAtMost(f *os.File, max int64) ([]byte, error) {
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, fmt.Errorf("too large")
	}
	buf := make([]byte, st.Size())
	_, err = ioReadFull(f, buf)
	return buf, err
}
