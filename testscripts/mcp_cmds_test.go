package testscripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// mcpClientCondition is the script condition [mcpclient]: node and the
// TypeScript MCP client (testscripts/mcpclient, installed by .ci/setup
// with npm ci) are there. Scripts skip without it ([!mcpclient] skip), but
// CI installs both and sets RLM_REQUIRE_NODE=1, which makes their absence
// an error, so CI can never pass without running the MCP scripts.
func mcpClientCondition() (bool, error) {
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	} else if _, err := os.Stat(filepath.Join("mcpclient", "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		missing = "the TypeScript MCP client is not installed: run (cd testscripts/mcpclient && npm ci), as .ci/setup does"
	}
	if missing == "" {
		return true, nil
	}
	if os.Getenv("RLM_REQUIRE_NODE") != "" {
		return false, fmt.Errorf("RLM_REQUIRE_NODE is set but %s", missing)
	}
	return false, nil
}
