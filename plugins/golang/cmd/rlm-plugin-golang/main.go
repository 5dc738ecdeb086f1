// Command rlm-plugin-golang is the Go runtime plugin for rlm.
package main

import "github.com/rlmkit/rlm/plugins/golang"

func main() { golang.Main() }
