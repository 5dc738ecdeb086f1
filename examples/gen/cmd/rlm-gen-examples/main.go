// Command rlm-gen-examples writes the inputs of rlm's examples (see
// package gen).
package main

import "github.com/rlmkit/rlm/examples/gen"

func main() { gen.Main() }
