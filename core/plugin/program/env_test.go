package program

import (
	"slices"
	"testing"
)

func TestEnviron(t *testing.T) {
	got, err := Environ([]string{"PATH=/bin"}, map[string]string{"B": "2", "A": "1"})
	if err != nil || !slices.Equal(got, []string{"PATH=/bin", "A=1", "B=2"}) {
		t.Fatalf("Environ: %q, %v", got, err)
	}
	if _, err := Environ(nil, map[string]string{"BAD NAME": "1"}); err == nil {
		t.Error("Environ took a name core.CheckEnv refuses")
	}
}
