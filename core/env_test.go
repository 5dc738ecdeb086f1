package core

import (
	"strings"
	"testing"
)

func TestCheckEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // "" = accepted
	}{
		{map[string]string{"A": "1", "B_2": "x y", "_": "", "lower_9": "x"}, ""},
		{map[string]string{"": "1"}, `env "": the name is not valid`},
		{map[string]string{"A=B": "1"}, `env "A=B": the name is not valid`},
		{map[string]string{"A\x00": "1"}, `env "A\x00": the name is not valid`},
		// Names a sandbox's /bin/sh start would drop (ValidEnvName).
		{map[string]string{"BAD NAME": "1"}, `env "BAD NAME": the name is not valid: want a letter or '_'`},
		{map[string]string{"a-b": "1"}, `env "a-b": the name is not valid`},
		{map[string]string{"1X": "1"}, `env "1X": the name is not valid`},
		{map[string]string{"\u00e9": "1"}, `env "é": the name is not valid`},
		{map[string]string{"A\xff": "1"}, `env "A\xff": the name is not valid`},
		{map[string]string{"A": "1\x002"}, `env "A": the value contains a NUL byte`},
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
}
