package core

import (
	"fmt"
	"strings"
)

// Declared capabilities are held on the host's side, like isolation levels
// (ResolveIsolation): a plugin that cannot do something is refused the
// request before it runs, whatever the plugin would have done with it. A
// plugin answering only what it implements is not enough: a runtime that
// does not install requirements (shell, golang, a third-party plugin
// without an installer) would run the program without them and say
// nothing, and the program would fail later in a way that hides why.

// CheckRequirements refuses requirements for the plugin info describes
// (named plugin in the message) unless it declares the "requirements"
// capability. Blank requirements are no requirements.
func CheckRequirements(info *Info, plugin string, reqs []string) error {
	if info.Has("requirements") {
		return nil
	}
	var named []string
	for _, r := range reqs {
		if r = strings.TrimSpace(r); r != "" {
			named = append(named, r)
		}
	}
	if len(named) == 0 {
		return nil
	}
	return refused(Invalid,
		"requirements cannot be installed (%s): plugin %s declares no requirements capability, so nothing would install them and the program would run without them; drop them, or use a runtime that installs requirements (python or node on the native backend)",
		strings.Join(named, ", "), plugin)
}

// CheckSyntaxCheck refuses a syntax check (rlm exec --check) for the
// plugin info describes unless it declares the "check" capability. The
// refusal is also ErrUnsupported (errors.Is).
func CheckSyntaxCheck(info *Info, plugin string) error {
	if info.Has("check") {
		return nil
	}
	return &RefusedError{Kind: Invalid, Err: ErrUnsupported, Msg: fmt.Sprintf(
		"plugin %s has no syntax check (it declares no check capability): drop --check to run the code, or use a runtime that checks syntax", plugin)}
}
