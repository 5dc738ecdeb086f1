package testscripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// e2bClientCondition is the script condition [e2bclient]: node and the
// unmodified E2B SDKs (testscripts/e2bclient, installed by .ci/setup with
// npm ci) are there. As with [mcpclient], RLM_REQUIRE_NODE=1 (set by CI)
// makes their absence an error rather than a skip.
func e2bClientCondition() (bool, error) {
	return nodeClientCondition("e2bclient", filepath.Join("@e2b", "code-interpreter"), "the E2B SDKs are")
}

// nodeClientCondition says whether node and the npm package pkg, installed
// in testscripts/dir, are there (what names the client in messages:
// "the E2B SDKs are").
func nodeClientCondition(dir, pkg, what string) (bool, error) {
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
		missing = fmt.Sprintf("%s not installed: run (cd testscripts/%s && npm ci), as .ci/setup does", what, dir)
	}
	if missing == "" {
		return true, nil
	}
	if os.Getenv("RLM_REQUIRE_NODE") != "" {
		return false, fmt.Errorf("RLM_REQUIRE_NODE is set but %s", missing)
	}
	return false, nil
}
