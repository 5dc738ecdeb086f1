package core

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// CleanName validates a request's file name and returns it in clean,
// slash-separated form. Subdirectories are allowed; absolute paths, "..",
// empty names and names ending in a slash (a directory, not a file) are
// not: the program's directory is its whole world.
func CleanName(name string) (string, error) {
	if name == "" {
		return "", errors.New("file name is empty")
	}
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("file name %q contains a NUL byte", name)
	}
	n := strings.ReplaceAll(name, "\\", "/")
	if strings.HasPrefix(n, "/") || filepath.IsAbs(name) {
		return "", fmt.Errorf("file name %q is absolute: use a path relative to the working directory", name)
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", fmt.Errorf("file name %q contains '..': files must stay inside the working directory", name)
		}
	}
	// path.Clean would drop a trailing slash and write a plain file where
	// the client named a directory; refuse it instead of guessing.
	if strings.HasSuffix(n, "/") {
		return "", fmt.Errorf("file name %q ends in a slash, which names a directory: name the file inside it (say %q)", name, n+"data.txt")
	}
	c := path.Clean(n)
	if c == "." {
		return "", fmt.Errorf("file name %q names the working directory itself", name)
	}
	return c, nil
}
