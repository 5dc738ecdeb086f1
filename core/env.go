package core

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// EnvError is CheckEnv's refusal of one variable: Name is the variable as
// asked for, Reason what is wrong with it and what to send instead. A
// caller with fields of its own (the HTTP server's env["NAME"]) names the
// field from Name; everyone else shows Error.
type EnvError struct {
	Name, Reason string
}

func (e *EnvError) Error() string { return fmt.Sprintf("env %q: %s", e.Name, e.Reason) }

// nameRule is the rule a name must follow, as told to whoever broke it.
const nameRule = "the name is not valid: want a letter or '_' followed by letters, digits or '_' (as a shell variable), since a sandboxed program is started through /bin/sh, which drops any other name"

// ValidEnvName says whether name can reach a program on every path. The
// limited isolation levels (process, namespace) start the program through
// a /bin/sh shim that stops itself for its cgroups and rlimits, then execs
// it; dash (Debian's /bin/sh) and other POSIX shells export only variables
// whose names are shell identifiers, so "BAD NAME", "a-b" or "é" would
// silently vanish there while reaching the program under isolation none.
// Refusing them everywhere keeps every level and runtime alike.
func ValidEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// CheckEnv refuses a request's environment when a name is not a shell
// identifier (ValidEnvName: the sandbox's shell would drop it, and a name
// with '=' would set another variable than the one named) or a value holds
// NUL (no program can receive it). The error is an *EnvError. It is the one
// check every runtime and every door (CLI, HTTP, MCP, daemon, plugins)
// applies, to programs and to sessions alike; names are checked in sorted
// order so the error is the same every time.
func CheckEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !ValidEnvName(k) {
			return &EnvError{Name: k, Reason: nameRule}
		}
		if strings.IndexByte(env[k], 0) >= 0 {
			return &EnvError{Name: k, Reason: "the value contains a NUL byte, which no program can receive"}
		}
	}
	return nil
}
