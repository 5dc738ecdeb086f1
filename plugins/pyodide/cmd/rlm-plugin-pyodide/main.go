// Command rlm-plugin-pyodide runs Python as CPython compiled to WASI inside
// wazero: the backend that needs no Python on the machine.
package main

import "github.com/rlmkit/rlm/plugins/pyodide"

func main() { pyodide.Main() }
