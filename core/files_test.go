package core

import "testing"

func TestCleanName(t *testing.T) {
	for _, ok := range []string{"a.txt", "sub/dir/b.txt", "./c", "a//b"} {
		if _, err := CleanName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/etc/passwd", "../x", "a/../../x", "a/..", ".", "a\x00b", "sub/", "sub\\", "a/b//"} {
		if _, err := CleanName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
