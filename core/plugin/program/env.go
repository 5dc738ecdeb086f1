package program

import (
	"maps"
	"slices"

	"github.com/rlmkit/rlm/core"
)

// Environ is base followed by the request's variables, after core.CheckEnv.
func Environ(base []string, env map[string]string) ([]string, error) {
	if err := core.CheckEnv(env); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		base = append(base, k+"="+env[k])
	}
	return base, nil
}
