// Command rlm runs code written by language models, safely and fast.
package main

import (
	"os"

	"github.com/rlmkit/rlm/cmd/rlm/cli/root"
)

func main() { os.Exit(root.Main(os.Args[1:])) }
