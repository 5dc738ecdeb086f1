// Command rlm-plugin-python is the native Python runtime plugin for rlm.
package main

import "github.com/rlmkit/rlm/plugins/python"

func main() { python.Main() }
