package testscripts

import "path/filepath"

// mcpClientCondition is the script condition [mcpclient]: node and the
// TypeScript MCP client (testscripts/mcpclient, installed by .ci/setup
// with npm ci) are there. Scripts skip without it ([!mcpclient] skip), but
// CI installs both and sets RLM_REQUIRE_NODE=1, which makes their absence
// an error, so CI can never pass without running the MCP scripts.
func mcpClientCondition() (bool, error) {
	return nodeClientCondition("mcpclient", filepath.Join("@modelcontextprotocol", "sdk"), "the TypeScript MCP client is")
}
