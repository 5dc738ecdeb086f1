// Command rlm runs code written by language models, safely and fast.
package main

import (
	"os"

	"github.com/rlmkit/rlm/cmd/rlm/internal/root"
)

func main() { os.Exit(root.Main(os.Args[1:])) }
