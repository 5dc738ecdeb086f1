package cmdutil

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckOutputFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		flag, path, want string
	}{
		{"-o", filepath.Join(dir, "page.html"), ""},
		{"-o", dir, "-o " + dir + " is a directory: give a file name such as " + filepath.Join(dir, "run.html")},
		{"", dir, dir + " is a directory"},
		{"--trace", filepath.Join(dir, "nodir", "x.html"), "--trace " + filepath.Join(dir, "nodir", "x.html") + ": the directory " + filepath.Join(dir, "nodir") + " does not exist: create it or choose another path"},
	} {
		err := CheckOutputFile(tc.flag, tc.path, "run.html")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.path, err)
			}
			continue
		}
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: got %v, want exit 2 with %q", tc.flag, tc.path, err, tc.want)
		}
	}
}
