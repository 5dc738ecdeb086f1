package program

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// CheckEnv refuses a request's environment when a name is empty or holds
// '=' or NUL (a name with '=' would set another variable than the one
// named) or a value holds NUL (no program can receive it). It is the one
// check every runtime applies, to programs and to sessions alike; names
// are checked in sorted order so the error is the same every time.
func CheckEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env name %q is not valid: want a name without '=' or NUL", k)
		}
		if strings.IndexByte(env[k], 0) >= 0 {
			return fmt.Errorf("env %s: the value contains a NUL byte, which no program can receive", k)
		}
	}
	return nil
}

// Environ is base followed by the request's variables, after CheckEnv.
func Environ(base []string, env map[string]string) ([]string, error) {
	if err := CheckEnv(env); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		base = append(base, k+"="+env[k])
	}
	return base, nil
}
