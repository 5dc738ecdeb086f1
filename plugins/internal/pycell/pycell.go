// Package pycell holds the Python shared by the native Python REPL driver
// (plugins/python/internal/repl) and the WebAssembly one (plugins/pyodide):
// each puts Source in front of its own driver, so a cell means the same on
// both backends — script semantics, and the repr of a final expression as
// the cell's result (cell.py) — and the helpers a cell calls (llm_query,
// chunk_text, search_context, SHOW_VARS, ...) exist once (helpers.py).
// Each driver keeps only its transport to the host.
package pycell

import _ "embed"

var (
	//go:embed cell.py
	cell string
	//go:embed helpers.py
	helpers string
)

// Source is cell.py then helpers.py: definitions only. Call
// _rlm_cell_run(code, name, namespace, limit) to run a cell, and
// _rlm_helpers_install(namespace, call) once, then
// _rlm_helpers_open(context), to give cells their helpers (see helpers.py).
var Source = cell + "\n" + helpers
