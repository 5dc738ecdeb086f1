package cmdutil

import (
	"os"
	"path/filepath"
)

// CheckOutputFile refuses path, a file a command is about to write, when
// writing it can only fail: its directory is missing, or path is itself
// a directory. Commands call it before doing the work, so that a run does
// not spend its time and tokens only to fail at the end, and every command
// that writes a file says the same thing. flag names the path as the user
// gave it ("--trace-html", "-o"; "" when the command chose the path) and
// example is a file name to suggest inside a directory ("run.html").
func CheckOutputFile(flag, path, example string) error {
	name := path
	if flag != "" {
		name = flag + " " + path
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return Usagef("%s: the directory %s does not exist: create it or choose another path", name, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return Usagef("%s is a directory: give a file name such as %s", name, filepath.Join(path, example))
	}
	return nil
}
