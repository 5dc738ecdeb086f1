package distinct

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestStrings(t *testing.T) {
	for _, c := range []struct {
		in    []string
		canon func(string) string
		want  []string
	}{
		{[]string{"b", "", "a", "b", "c", "a"}, nil, []string{"b", "a", "c"}},
		{[]string{" Py", "py", "node ", ""}, func(s string) string { return strings.ToLower(strings.TrimSpace(s)) }, []string{"py", "node"}},
		{[]string{"/a/", "/a", "/b/../a", "/c"}, filepath.Clean, []string{"/a", "/c"}},
		{nil, nil, nil},
	} {
		if got := Strings(c.in, c.canon); !slices.Equal(got, c.want) {
			t.Errorf("Strings(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
