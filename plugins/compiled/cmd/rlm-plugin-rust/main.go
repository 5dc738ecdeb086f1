// Command rlm-plugin-rust is the rust runtime plugin for rlm (see plugins/compiled).
package main

import "github.com/rlmkit/rlm/plugins/compiled"

func main() { compiled.Main(compiled.Rust) }
