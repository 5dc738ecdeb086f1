// Command rlm-plugin-node is the Node.js runtime plugin for rlm.
package main

import "github.com/rlmkit/rlm/plugins/node"

func main() { node.Main() }
