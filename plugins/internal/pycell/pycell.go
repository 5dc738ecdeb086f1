// Package pycell holds the Python that runs a REPL cell, shared by the
// native Python REPL driver (plugins/python/internal/repl) and the
// WebAssembly one (plugins/pyodide): each puts Source in front of its own
// driver, so a cell means the same on both backends — script semantics,
// and the repr of a final expression as the cell's result (see cell.py).
package pycell

import _ "embed"

// Source is cell.py: definitions only, every name starting with _rlm_cell.
// Call _rlm_cell_run(code, name, namespace, limit) to run a cell.
//
//go:embed cell.py
var Source string
