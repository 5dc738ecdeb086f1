package testscripts

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"
)

// needmcpclient skips the script when node or the TypeScript MCP client
// (testscripts/mcpclient, installed by .ci/setup with npm ci) is absent,
// and sets $MCPCLIENT to the client script. CI installs both and sets
// RLM_REQUIRE_NODE=1, which turns the skip into a failure, so CI can never
// pass without running these scripts.
func cmdNeedMCPClient(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: needmcpclient")
	}
	dir, err := filepath.Abs("mcpclient")
	if err != nil {
		ts.Fatalf("%v", err)
	}
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		missing = "the TypeScript MCP client is not installed: run (cd testscripts/mcpclient && npm ci), as .ci/setup does"
	}
	if missing != "" {
		if os.Getenv("RLM_REQUIRE_NODE") != "" {
			ts.Fatalf("RLM_REQUIRE_NODE is set but %s", missing)
		}
		ts.Skip(missing + " (set RLM_REQUIRE_NODE=1 to make this a failure)")
	}
	ts.Setenv("MCPCLIENT", filepath.Join(dir, "client.mjs"))
}
