package program

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string][]byte
		want string // "" = accepted
	}{
		{map[string][]byte{"A": []byte("1"), "B_2": []byte("x y")}, ""},
		{map[string][]byte{"": []byte("1")}, `env name "" is not valid`},
		{map[string][]byte{"A=B": []byte("1")}, `env name "A=B" is not valid`},
		{map[string][]byte{"A\x00": []byte("1")}, `env name "A\x00" is not valid`},
		{map[string][]byte{"A": []byte("1\x002")}, "env A: the value contains a NUL byte"},
	} {
		err := CheckEnv(tc.env)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.env, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.env, err, tc.want)
		}
	}
	got, err := Environ([]string{"PATH=/bin"}, map[string][]byte{"B": []byte("2"), "A": []byte("1")})
	if err != nil || !slices.Equal(got, []string{"PATH=/bin", "A=1", "B=2"}) {
		t.Fatalf("Environ: %q, %v", got, err)
	}
}
