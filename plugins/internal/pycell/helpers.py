# The helpers a REPL cell sees (llm_query, llm_query_batched, rlm_query,
# rlm_query_batched, chunk_text, search_context, SHOW_VARS, LLMQueryError),
# shared by the native driver (plugins/python/internal/repl/driver.py) and
# the WebAssembly one (plugins/pyodide/repl_driver.py): both embed this file
# after cell.py (plugins/internal/pycell), so the helpers behave the same on
# both backends. Python 3.8+. Only definitions, and no imports at module
# level: the native driver's start-up imports nothing it does not need.
#
# The seam: each driver has its own channel to the host, so it calls
# _rlm_helpers_install(ns, call) once with the cell namespace and its
# transport, then _rlm_helpers_open(value) when the session's context
# arrives. call(kind, prompts, contexts, has_context, model) sends one
# callback request and returns (results, error): the answers in order, or
# the host's error message. Private names start with _rlm_helpers.


class LLMQueryError(RuntimeError):
    """A model query made through llm_query / rlm_query failed."""


class ToolError(RuntimeError):
    """A host-side tool (declared by the operator in the task file) failed:
    its command or endpoint failed or timed out, or its budget ran out."""


# ns: the cell namespace; call: the driver's transport; opened: the context
# the host sent. While `context` still is that very object, a sub-query's
# default context is sent as "the session's own" (has_context false), so a
# 50 MB context does not travel back to the host on every rlm_query.
_rlm_helpers = {"ns": {}, "call": None, "opened": None, "names": {}}


def _rlm_helpers_install(ns, call):
    """Put the helpers into the cell namespace ns, with call as transport,
    and `context` as None until _rlm_helpers_open."""
    names = {
        f.__name__: f
        for f in (llm_query, llm_query_batched, rlm_query, rlm_query_batched, chunk_text, search_context, SHOW_VARS)
    }
    names["LLMQueryError"] = LLMQueryError
    names["ToolError"] = ToolError
    _rlm_helpers.update(ns=ns, call=call, names=names)
    ns.update(names)
    ns["_rlm_tool_call"] = _rlm_helpers_tool_call
    ns["_rlm_helpers_hide"] = _rlm_helpers_hide
    _rlm_helpers_open(None)


def _rlm_helpers_open(value):
    """Make value the session's context: the cell variable `context`."""
    _rlm_helpers["ns"]["context"] = value
    _rlm_helpers["opened"] = value


def _rlm_helpers_call(kind, prompts, contexts=None, has_context=None, model=None):
    results, error = _rlm_helpers["call"](kind, prompts, contexts, has_context, model)
    if error is not None:
        raise LLMQueryError(error or "%s failed" % kind)
    results = results or []
    if len(results) != len(prompts):
        raise LLMQueryError("%s: expected %d results, got %d" % (kind, len(prompts), len(results)))
    return results


def _rlm_helpers_tool_call(name, args):
    """Call the host-side tool name with args (a dict, sent as JSON) over
    the callback channel; the host answers JSON text. The stubs the RLM
    engine defines for the operator's tools call this (core/engine/tools.go)."""
    import json

    try:
        req = json.dumps({"name": name, "args": args})
    except (TypeError, ValueError) as e:
        raise TypeError("%s(): arguments must be JSON values (str, int, float, bool, None, list, dict): %s" % (name, e)) from None
    try:
        out = _rlm_helpers_call("tool_call", [req])[0]
    except LLMQueryError as e:
        raise ToolError(str(e)) from None
    return json.loads(out)


def _rlm_helpers_hide(names):
    """Count the REPL's names as helpers (SHOW_VARS leaves them out): the
    tools the engine preloads are not the model's variables."""
    ns = _rlm_helpers["ns"]
    for k in names:
        if k in ns:
            _rlm_helpers["names"][k] = ns[k]


def _rlm_helpers_text(x, what):
    if isinstance(x, str):
        return x
    if isinstance(x, (bytes, bytearray)):
        return bytes(x).decode("utf-8", "replace")
    raise TypeError("%s must be a str, not %s" % (what, type(x).__name__))


def _rlm_helpers_ctx_text(ctx):
    """A context as text: a str as is, bytes decoded, anything else as its
    JSON (its repr when JSON cannot encode it)."""
    if isinstance(ctx, (str, bytes, bytearray)):
        return _rlm_helpers_text(ctx, "ctx")
    import json

    try:
        return json.dumps(ctx, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(ctx)


def _rlm_helpers_model(model):
    return None if model is None else _rlm_helpers_text(model, "model")


def _rlm_helpers_contexts(ctxs):
    """The contexts and has_context flags of a rlm_query request: None means
    the current `context`, sent only when the cell rebound it."""
    cur = _rlm_helpers["ns"].get("context")
    texts, has = [], []
    for c in ctxs:
        if c is None and cur is not _rlm_helpers["opened"]:
            c = cur
        has.append(c is not None)
        texts.append(_rlm_helpers_ctx_text(c) if c is not None else "")
    return texts, has


def _rlm_helpers_reference():
    """Whether the loop speaks the reference implementation's protocol
    (the RLM engine sets _rlm_protocol: core/engine/protocol.go)."""
    return _rlm_helpers["ns"].get("_rlm_protocol") == "reference"


# A batch's answer for a prompt that failed begins with this (core's
# QueryErrorPrefix); the rest is the error.
_RLM_QUERY_ERROR = "\x00rlm-query-error\x00"


def _rlm_helpers_answers(kind, prompts, contexts=None, has_context=None, model=None):
    """The answers to prompts. A prompt of a batch that failed has an
    LLMQueryError in its place; in the reference protocol every failure is
    a str starting "Error: ", as there, instead of raising."""
    try:
        results = _rlm_helpers_call(kind, prompts, contexts, has_context, model)
    except LLMQueryError as e:
        if not _rlm_helpers_reference():
            raise
        return ["Error: %s" % e] * len(prompts)
    out = []
    for r in results:
        if isinstance(r, str) and r.startswith(_RLM_QUERY_ERROR):
            msg = r[len(_RLM_QUERY_ERROR):]
            r = ("Error: %s" % msg) if _rlm_helpers_reference() else LLMQueryError(msg)
        out.append(r)
    return out


def llm_query(prompt, model=None):
    """Ask the session's model one question; returns its answer as a str."""
    return _rlm_helpers_answers("llm_query", [_rlm_helpers_text(prompt, "prompt")], model=_rlm_helpers_model(model))[0]


def llm_query_batched(prompts, model=None):
    """Ask several questions in one round trip; the host runs them
    concurrently. Returns the answers in order; a prompt that failed has
    an LLMQueryError in its place, the others their answers (in the
    reference protocol, a str starting "Error: ")."""
    prompts = [_rlm_helpers_text(p, "prompt") for p in prompts]
    if not prompts:
        return []
    return _rlm_helpers_answers("llm_query", prompts, model=_rlm_helpers_model(model))


def _rlm_helpers_rlm_args(ctx, model):
    """rlm_query's (ctx, model): in the reference protocol its signature is
    rlm_query(prompt, model=None), so a second positional argument is the
    model and the child explores the prompt."""
    if _rlm_helpers_reference() and model is None and ctx is not None:
        return None, ctx
    return ctx, model


def rlm_query(task, ctx=None, model=None):
    """Run a recursive RLM sub-task. ctx defaults to the current `context`;
    model, when given, drives the child loop."""
    ctx, model = _rlm_helpers_rlm_args(ctx, model)
    texts, has = _rlm_helpers_contexts([ctx])
    return _rlm_helpers_answers("rlm_query", [_rlm_helpers_text(task, "task")], texts, has, _rlm_helpers_model(model))[0]


def rlm_query_batched(tasks, ctxs=None, model=None):
    """Run several sub-tasks in one round trip (concurrently on the host).
    ctxs, when given, must have one entry per task; None entries and a
    missing ctxs default to the current `context`."""
    ctxs, model = _rlm_helpers_rlm_args(ctxs, model)
    tasks = [_rlm_helpers_text(t, "task") for t in tasks]
    if not tasks:
        return []
    ctxs = [None] * len(tasks) if ctxs is None else list(ctxs)
    if len(ctxs) != len(tasks):
        raise ValueError("rlm_query_batched: %d tasks but %d contexts" % (len(tasks), len(ctxs)))
    texts, has = _rlm_helpers_contexts(ctxs)
    return _rlm_helpers_answers("rlm_query", tasks, texts, has, _rlm_helpers_model(model))


def chunk_text(text, size=2000, overlap=200):
    """Split text into chunks of `size` characters, each sharing `overlap`
    characters with the previous one. Returns [] for empty text."""
    if not isinstance(size, int) or size <= 0:
        raise ValueError("chunk_text: size must be a positive integer")
    if not isinstance(overlap, int) or overlap < 0 or overlap >= size:
        raise ValueError("chunk_text: overlap must satisfy 0 <= overlap < size")
    n, step, out, i = len(text), size - overlap, [], 0
    while i < n:
        out.append(text[i : i + size])
        if i + size >= n:
            break
        i += step
    return out


def search_context(pattern, window=200, flags=0, max_results=None):
    """Regex search over `context` (a non-str context is searched as its JSON
    text). Returns a list of dicts: match, start, end, snippet (the match
    with `window` characters either side), snippet_start. At most
    max_results hits when it is not None."""
    import re

    if not isinstance(window, int) or window < 0:
        raise ValueError("search_context: window must be an integer >= 0")
    if max_results is not None and (not isinstance(max_results, int) or max_results < 0):
        raise ValueError("search_context: max_results must be None or an integer >= 0")
    c = _rlm_helpers["ns"].get("context")
    text = "" if c is None else _rlm_helpers_ctx_text(c)
    out = []
    for m in re.finditer(pattern, text, flags):
        if max_results is not None and len(out) >= max_results:
            break
        s, e = m.start(), m.end()
        lo = max(0, s - window)
        out.append({"match": m.group(0), "start": s, "end": e, "snippet": text[lo : e + window], "snippet_start": lo})
    return out


def SHOW_VARS():
    """Print and return the user's variables with their types (modules,
    _private names and the helpers themselves left out). In the reference
    protocol it prints nothing and returns a str, as there."""
    import types

    names = _rlm_helpers["names"]
    out = {}
    for k, v in list(_rlm_helpers["ns"].items()):
        if k.startswith("_") or (k in names and names[k] is v) or isinstance(v, types.ModuleType):
            continue
        out[k] = type(v).__name__
    if _rlm_helpers_reference():
        out.pop("answer", None)
        if not out:
            return "No variables created yet. Use ```repl``` blocks to create variables."
        return "Available variables: %s" % out
    if out:
        for k, t in out.items():
            print("%s: %s" % (k, t))
    else:
        print("(no variables)")
    return out
