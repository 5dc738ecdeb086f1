//go:build !linux

package launch

import "os/exec"

// ownMountNamespace: mount namespaces are Linux's.
func ownMountNamespace(*exec.Cmd) {}
