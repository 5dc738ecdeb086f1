package testscripts

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rlmkit/rlm/core"
)

// resultkeys FILE... checks that the JSON objects in the FILEs carry the
// same fields of core.Result: among core.Result's JSON names, each has the
// same keys, and at least the ones core.Result always writes. An empty
// object, array or null counts as absent: core.Result leaves empty ones out,
// the server writes the earlier server's files_produced as {}. Keys that are
// not core.Result's (the server's aliases, exec's runtime) may differ.
func cmdResultKeys(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: resultkeys FILE FILE...")
	}
	names, always := resultNames()
	var first []string
	for i, file := range args {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ts.ReadFile(file)), &obj); err != nil {
			ts.Fatalf("resultkeys: %s is not a JSON object: %v", file, err)
		}
		var keys []string
		for k := range obj {
			if names[k] && !empty(obj[k]) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range always {
			if _, ok := obj[k]; !ok {
				ts.Fatalf("resultkeys: %s lacks %s", file, k)
			}
		}
		if i == 0 {
			first = keys
		} else if !slices.Equal(keys, first) {
			ts.Fatalf("resultkeys: %s carries %v\n%s carries %v", args[0], first, file, keys)
		}
	}
}

func empty(v json.RawMessage) bool {
	s := string(v)
	return s == "{}" || s == "[]" || s == "null"
}

// resultNames is core.Result's JSON names, and those it writes even when
// zero (no omitempty).
func resultNames() (names map[string]bool, always []string) {
	names = map[string]bool{}
	t := reflect.TypeFor[core.Result]()
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		names[name] = true
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	return names, always
}
