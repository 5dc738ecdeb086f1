// Command rlm-plugin-shell is the bash runtime plugin for rlm.
package main

import "github.com/rlmkit/rlm/plugins/shell"

func main() { shell.Main() }
