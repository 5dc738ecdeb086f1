# rlm Python REPL driver.
#
# Embedded in the Go host (driver.go) and started as
#   python -c "<bootstrap>" <plugins/internal/pycell (cell.py, helpers.py) + this source>
# (or from its marshalled code object, see driver.go), so its frames carry
# the file name <rlm-driver> and can be cut out of user tracebacks.
# Python 3.8+.
#
# Channels:
#   fd 3  host -> driver   JSON-RPC 2.0 frames (4-byte big-endian length + UTF-8 JSON)
#   fd 4  driver -> host   the same framing
#   fd 5  host -> driver   interrupt notes (4-byte cell numbers), see _interrupt_requested
#   fd 0  /dev/null; fd 1 and 2 are the user's stdout and stderr (pipes the
#         host reads).  The private fds are moved to high, close-on-exec
#         numbers at once, so user code and its children never see them on
#         0/1/2 and children do not inherit them.
#
# Cell end: flush sys.stdout/sys.stderr, write the host's per-cell marker to
# private duplicates of fd 1 and fd 2, then send the result frame.
#
# Only cheap modules are imported at start (os, sys, _thread, fcntl, io,
# _signal, json); traceback, linecache, codecs and re are imported when first
# needed.

import os
import sys
import _thread

_DRIVER_FILE = "<rlm-driver>"
_CODE = globals().pop("_rlm_code", None)  # this module's code, set by the bootstrap
_PID = os.getpid()
_MAIN_IDENT = _thread.get_ident()


def _move_high(fd):
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)


_RFD = _move_high(3)
_WFD = _move_high(4)
# fd 5: interrupt notes. Before each SIGINT the host writes the number of
# the cell it means (4 bytes), so a signal that arrives after the request
# was sent but before the cell started still interrupts it, while a late
# one meant for an earlier cell is ignored.
_IFD = _move_high(5)
os.close(3)
os.close(4)
os.close(5)
os.set_blocking(_IFD, False)
# Private duplicates of the output pipes for the end-of-cell markers: user
# code may close or redirect fd 1/2, the marker must still reach the host.
_OUT = _move_high(1)
_ERR = _move_high(2)

_rf = open(_RFD, "rb", buffering=1 << 16, closefd=False)


def _buffered_stdout():
    # Keep stdout block-buffered, as for any script writing to a pipe, even
    # under PYTHONUNBUFFERED / -u: output is collected per cell and flushed
    # at its end, and a syscall per print makes print-heavy cells ~10x
    # slower. (On a hard kill, at most 8 KiB of unflushed output is lost.)
    import io

    s = sys.stdout
    try:
        if s is None or s.fileno() != 1:
            return
    except (AttributeError, ValueError, OSError):
        return
    if isinstance(getattr(s, "buffer", None), io.BufferedWriter) and not s.write_through and not s.line_buffering:
        return
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False), 1 << 13), encoding=s.encoding, errors=s.errors
    )


_buffered_stdout()

import json as _json  # noqa: E402  (needed for every message)

_dumps = _json.dumps
_loads = _json.loads

_io_lock = _thread.allocate_lock()  # held across one request/response pair
_running = False  # a cell is executing: SIGINT raises KeyboardInterrupt
_in_proto = False  # main thread is inside a callback round trip
_pending = False  # SIGINT arrived during a callback: raise after it
_sigint_seen = False  # a SIGINT arrived since the last reply was sent
_cb_seq = 0
_cells = {}  # "<cell N>" -> source, for tracebacks / linecache


def _die(code):
    os._exit(code)


def _write_all(fd, data):
    mv = memoryview(data)
    while mv:
        n = os.write(fd, mv)
        mv = mv[n:]


def _send(obj):
    _send_text(_dumps(obj))


def _send_text(text):
    data = text.encode("utf-8")
    try:
        _write_all(_WFD, len(data).to_bytes(4, "big") + data)
    except OSError:
        _die(70)  # the host is gone or the channel was closed under us


def _read_exact(n):
    b = _rf.read(n)
    if b is None or len(b) != n:
        _die(0)  # host closed the channel: shut down quietly
    return b


def _recv():
    n = int.from_bytes(_read_exact(4), "big")
    return _loads(_read_exact(n))


def _interrupt_requested(cell):
    """Drain the interrupt notes; True if one is for this cell."""
    hit = False
    while True:
        try:
            b = os.read(_IFD, 4096)
        except OSError:  # EAGAIN: nothing (more) to read
            return hit
        if not b:
            return hit
        for i in range(0, len(b) - 3, 4):
            if int.from_bytes(b[i : i + 4], "big") == cell:
                hit = True


def _on_sigint(signum, frame):
    global _pending, _sigint_seen
    _sigint_seen = True
    if not _running:
        # idle: ignore. (A host interrupt that lands just before its cell
        # starts is caught by _interrupt_requested.)
        return
    if _in_proto:
        _pending = True  # never break a frame in half; raise after the reply
        return
    raise KeyboardInterrupt


# ---------------------------------------------------------------------------
# user namespace and helpers (plugins/internal/pycell/helpers.py); this
# driver supplies their transport


def _callback(kind, prompts, contexts, has_context, model):
    """helpers.py's transport: one callback request over the protocol
    channel, safe from any thread; returns (results, error)."""
    global _in_proto, _pending, _cb_seq
    if os.getpid() != _PID:
        return None, "%s is not available in a forked child process" % kind
    main = _thread.get_ident() == _MAIN_IDENT
    if main:
        _in_proto = True
    try:
        with _io_lock:
            _cb_seq += 1
            cid = "cb%d" % _cb_seq
            params = {"kind": kind, "prompts": prompts}
            if contexts is not None:
                params["contexts"] = contexts
                params["has_context"] = has_context
            if model is not None:
                params["model"] = model
            _send({"jsonrpc": "2.0", "id": cid, "method": "callback", "params": params})
            while True:
                msg = _recv()
                if msg.get("id") == cid:
                    break
    finally:
        if main:
            _in_proto = False
    if main and _pending:
        _pending = False
        raise KeyboardInterrupt
    err = msg.get("error")
    if err is not None:
        return None, err.get("message") or ""
    return (msg.get("result") or {}).get("results"), None


# ---------------------------------------------------------------------------
# cells


def _new_namespace():
    import types

    global _driver_module
    _driver_module = sys.modules["__main__"]  # keep the driver's own module alive
    mod = types.ModuleType("__main__")
    mod.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = mod
    return mod.__dict__


_ns = _new_namespace()
_rlm_helpers_install(_ns, _callback)


def _linecache_all():
    import linecache

    for name, src in _cells.items():
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)


def _flush_all():
    for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if s is not None:
                s.flush()
        except BaseException:
            pass
    if "ctypes" in sys.modules:  # C stdio buffers of extensions
        global _libc
        try:
            if _libc is None:
                import ctypes

                _libc = ctypes.CDLL(None)
            _libc.fflush(None)
        except BaseException:
            pass


_libc = None


def _strip_driver_frames(tb):
    # outer frames: the driver's own loop, up to the first cell frame
    while tb is not None and tb.tb_frame.f_code.co_filename == _DRIVER_FILE:
        tb = tb.tb_next
    # inner frames: driver helpers (llm_query, ...) the cell called
    head = tb
    prev = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _DRIVER_FILE and prev is not None:
            try:
                prev.tb_next = tb.tb_next
            except (AttributeError, TypeError):
                prev = tb
            tb = tb.tb_next
            continue
        prev = tb
        tb = tb.tb_next
    return head


def _exc_name(e):
    t = type(e)
    mod = getattr(t, "__module__", "builtins")
    if mod in ("builtins", "__main__", None):
        return t.__qualname__
    return "%s.%s" % (mod, t.__qualname__)


def _report(e):
    """Print the traceback to the user's stderr; return 'Type: message'."""
    msg = str(e)
    name = _exc_name(e)
    err = name + (": " + msg if msg else "")
    try:
        import traceback

        _linecache_all()
        tb = _strip_driver_frames(e.__traceback__)
        text = "".join(traceback.format_exception(type(e), e, tb))
        stream = sys.stderr if sys.stderr is not None else sys.__stderr__
        stream.write(text)
    except BaseException:
        try:
            os.write(2, (err + "\n").encode("utf-8", "replace"))
        except BaseException:
            pass
    return err


def _write_stream(text):
    try:
        stream = sys.stderr if sys.stderr is not None else sys.__stderr__
        stream.write(text)
    except BaseException:
        pass


def _run_cell(p):
    global _running, _pending
    code = p["code"]
    cell = p.get("cell", 0)
    name = "<cell %d>" % p.get("cell", 0)
    _cells[name] = code
    res = {"exit_code": 0, "error": "", "interrupted": False, "value": None}
    try:
        try:
            _pending = False
            _running = True
            if _sigint_seen and _interrupt_requested(cell):  # interrupted before it started
                raise KeyboardInterrupt
            # cell.py: runs the cell, returns the repr of a final expression
            res["value"] = _rlm_cell_run(code, name, _ns, p.get("max_value", 1 << 20))
        finally:
            _running = False
    except SystemExit as e:
        c = e.code
        if c is None:
            res["exit_code"] = 0
        elif isinstance(c, int):  # bool too: sys.exit(True) exits 1
            res["exit_code"] = c & 0xFF  # as a script's exit status would be
            if c != 0:
                res["error"] = "SystemExit: %d" % c
        else:
            _write_stream("%s\n" % (c,))
            res["exit_code"] = 1
            res["error"] = "SystemExit: %s" % (c,)
    except KeyboardInterrupt as e:
        res["interrupted"] = True
        res["exit_code"] = 130
        res["error"] = _report(e)
    except BaseException as e:
        res["exit_code"] = 1
        res["error"] = _report(e)
    if os.getpid() != _PID:
        # a cell forked (os.fork) and this is the child reaching the end of
        # the cell: it must not speak the protocol
        _flush_all()
        os._exit(res["exit_code"] & 0xFF)
    # re-arm our SIGINT handler if the cell replaced it: the driver owns
    # SIGINT between cells
    if _signal.getsignal(_signal.SIGINT) is not _on_sigint:
        _signal.signal(_signal.SIGINT, _on_sigint)
    _flush_all()
    marker = p["marker"].encode("ascii")
    for key, fd in (("marker_out", _OUT), ("marker_err", _ERR)):
        try:
            _write_all(fd, marker)
            res[key] = True
        except OSError:
            res[key] = False
    return res


_MAX_REPR = 1 << 20


def _get_variable(p):
    name = p["name"]
    if name not in _ns:
        return {"found": False}
    v = _ns[name]
    try:
        s = _dumps(v, allow_nan=False)
    except BaseException:
        try:
            r = repr(v)
        except BaseException as e:
            r = "<unrepresentable %s: %s>" % (type(v).__name__, _exc_name(e))
        if len(r) > _MAX_REPR:
            r = r[:_MAX_REPR] + "... [%d characters omitted]" % (len(r) - _MAX_REPR)
        s = _dumps(r)
    return {"found": True, "json": s}


def _readinto_full(mv):
    pos = 0
    while pos < len(mv):
        k = _rf.readinto(mv[pos:])
        if not k:
            _die(0)
        pos += k


def _concat(first, pieces):
    # `s += piece` on a str only this frame references grows it in place
    # (realloc; for a large str that has its own mapping, an mremap, not a
    # copy). On 3.11+ that happens in the specialised BINARY_OP, so callers
    # warm this function up before relying on it.
    s = first()
    for piece in pieces:
        s += piece
    return s


def _read_context(n):
    """Read n raw UTF-8 bytes and decode them into one str, with peak
    memory about 1.5x the text rather than bytes + text.

    The first 33 MiB are decoded at once: a str that big is above glibc's
    largest dynamic mmap threshold (32 MiB), so it gets its own mapping. The
    rest arrives in 1 MiB pieces, read into one reused buffer and appended
    in place (see _concat). codecs.utf_8_decode reads the buffers without
    copying them; an incomplete character at the end of a piece is carried
    into the next."""
    from codecs import utf_8_decode

    first = min(n, 33 << 20)
    state = {"carry": b""}

    def head():
        buf = bytearray(first)
        mv = memoryview(buf)
        _readinto_full(mv)
        s, used = utf_8_decode(mv, "replace", first >= n)
        state["carry"] = bytes(mv[used:])
        mv.release()
        return s

    def pieces():
        pos = first
        chunk = bytearray(1 << 20)
        cmv = memoryview(chunk)
        while pos < n:
            carry = state["carry"]
            c = len(carry)
            cmv[:c] = carry
            k = min(len(chunk) - c, n - pos)
            _readinto_full(cmv[c : c + k])
            pos += k
            piece, used = utf_8_decode(cmv[: c + k], "replace", pos >= n)
            state["carry"] = bytes(cmv[used : c + k])
            yield piece
        cmv.release()

    if n > first:
        for _ in range(4):
            _concat(str, ["."] * 64)
    return _concat(head, pieces())


def _open(p):
    n = p.get("context_bytes")
    if n is not None:
        text = _read_context(n)
        if (p.get("kind") or "text") == "json":
            text = _loads(text)
        _rlm_helpers_open(text)
        del text
    v = sys.version_info
    res = {"python": "%d.%d.%d" % (v[0], v[1], v[2]), "pid": _PID}
    if p.get("want_code") and _CODE is not None:
        # the host caches this and starts later drivers without compiling
        import binascii
        import marshal

        res["code"] = binascii.b2a_base64(marshal.dumps(_CODE), newline=False).decode("ascii")
    return res


try:
    from _json import encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - CPython always has _json
    from json.encoder import encode_basestring_ascii as _quote

_CELL_REPLY = '{"jsonrpc":"2.0","id":%d,"result":{"exit_code":%d,"error":%s,"interrupted":%s,"marker_out":%s,"marker_err":%s,"value":%s}}'
_TF = ("false", "true")


def _cell_reply(mid, r):
    # the per-cell reply, formatted directly: several times cheaper than
    # json.dumps of the nested dicts
    v = r.get("value")
    return _CELL_REPLY % (
        mid,
        r["exit_code"],
        _quote(r["error"]),
        _TF[r["interrupted"]],
        _TF[r.get("marker_out", False)],
        _TF[r.get("marker_err", False)],
        "null" if v is None else _quote(v),
    )


def _serve():
    global _sigint_seen
    handlers = {"execute": _run_cell, "get_variable": _get_variable, "open": _open}
    _io_lock.acquire()
    while True:
        msg = _recv()
        _io_lock.release()
        mid = msg.get("id")
        method = msg.get("method")
        h = handlers.get(method)
        try:
            if h is None:
                raise ValueError("unknown method %r" % (method,))
            result = h(msg.get("params") or {})
            if h is _run_cell and type(mid) is int:
                reply = _cell_reply(mid, result)
            else:
                reply = _dumps({"jsonrpc": "2.0", "id": mid, "result": result})
        except BaseException as e:  # noqa: B902 - never let the loop die
            reply = _dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32000, "message": "%s: %s" % (_exc_name(e), e)}})
        _io_lock.acquire()
        # A SIGINT meant for the next cell can only be sent after the host
        # has read this reply, so it arrives after this point (earlier ones
        # are filtered by their note, see _interrupt_requested).
        _sigint_seen = False
        _send_text(reply)


import _signal  # noqa: E402  (signal.getsignal wraps results in enums: slow)

_signal.signal(_signal.SIGINT, _on_sigint)
sys.argv = [""]
_serve()
