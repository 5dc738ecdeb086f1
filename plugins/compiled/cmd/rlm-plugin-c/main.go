// Command rlm-plugin-c is the c runtime plugin for rlm (see plugins/compiled).
package main

import "github.com/rlmkit/rlm/plugins/compiled"

func main() { compiled.Main(compiled.C) }
