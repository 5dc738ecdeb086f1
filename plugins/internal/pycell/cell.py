# How rlm's Python REPLs run a cell, shared by the native driver
# (plugins/python/internal/repl/driver.py) and the WebAssembly one
# (plugins/pyodide/repl_driver.py): each embeds this file in front of its
# own source (plugins/internal/pycell), so the cell semantics the model sees
# are written once. Python 3.8+. Only definitions: nothing runs at import,
# and every name starts with _rlm_cell so it clashes with neither driver.
#
# A cell runs as a script does, then, as in a Jupyter notebook, the value of
# a final expression statement comes back as its repr (not printed): the
# cell's `result`. A final expression followed by a semicolon, a value of
# None and any other final statement give no result.


def _rlm_cell_compile(code, name):
    """Compile a cell: the code object of its statements, and that of its
    final expression (None when it has no result to give)."""
    import _ast  # the C module: `ast` would import enum & co. on first use

    tree = compile(code, name, "exec", _ast.PyCF_ONLY_AST, True)
    last = None
    body = tree.body
    if body and type(body[-1]) is _ast.Expr and not _rlm_cell_muted(code, body[-1]):
        last = compile(_ast.Expression(body.pop().value), name, "eval", 0, True)
    return compile(tree, name, "exec", 0, True), last


def _rlm_cell_muted(code, node):
    """True when the expression statement node is followed by a semicolon
    (`df.plot();`), which in a notebook hides its value."""
    line, col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
    if line is None or col is None:
        return False
    # the tokenizer's line ends: \n, \r\n and \r; col is in UTF-8 bytes
    lines = code.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if line > len(lines):
        return False
    rest = lines[line - 1].encode("utf-8", "surrogatepass")[col:]
    return rest.lstrip().startswith(b";")


def _rlm_cell_value(value, limit):
    """The cell's result: None for None, else repr(value), at most limit
    bytes of UTF-8 (limit <= 0: no cap). A longer repr keeps its head and
    tail around the notice output gets, "... [N bytes omitted] ..."."""
    if value is None:
        return None
    try:
        text = repr(value)
    except Exception as e:  # KeyboardInterrupt (a timeout) goes on up
        text = "<unrepresentable %s: %s>" % (type(value).__name__, type(e).__name__)
    if limit > 0 and len(text) * 4 > limit:
        data = text.encode("utf-8", "replace")
        if len(data) > limit:
            half = limit // 2
            head = data[:half].decode("utf-8", "ignore")
            tail = data[len(data) - half :].decode("utf-8", "ignore")
            omitted = len(data) - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
            text = "%s\n... [%d bytes omitted] ...\n%s" % (head, omitted, tail)
    return text


def _rlm_cell_run(code, name, ns, limit):
    """Run code as one cell in the namespace ns (compiled as file `name`,
    so tracebacks name the cell) and return its result (see above)."""
    body, last = _rlm_cell_compile(code, name)
    exec(body, ns)
    if last is None:
        return None
    return _rlm_cell_value(eval(last, ns), limit)
