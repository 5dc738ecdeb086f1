# Script semantics shared by rlm's Python fork servers: the plain one of
# plugins/python (isolation none) and the sandboxed worker of internal/warm.
# run_main runs a file as __main__ in a freshly forked child, the way
# `python3 FILE ARGS...` would: sys.argv, sys.path[0], __file__, the
# environment, tracebacks without this file's frames, SystemExit, atexit
# handlers and non-daemon threads. The caller has already set the standard
# files and the working directory.
import _signal
import _thread
import array
import atexit
import builtins
import gc
import json
import os
import select
import signal
import socket
import sys
import types

zygote_path0 = sys.path[0]


def exit_code(e):
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c & 0xFF
    try:
        print(c, file=sys.stderr)
    except Exception:
        pass
    return 1


def finish(code=0):
    """What the interpreter does at exit: join threads, run atexit, flush."""
    try:
        # Only threads started since the fork can be there to join: a run
        # none of whose threads still runs skips the work and its
        # copy-on-write faults. _thread._count() (threads not yet finished,
        # the main one aside) is a C call; threading.active_count() was
        # ~12 faults of Python code to say the same.
        if _thread._count():
            t = sys.modules.get("threading")
            if t is not None and t.active_count() > 1:
                t._shutdown()
    except BaseException:
        pass
    try:
        if atexit._ncallbacks():
            atexit._run_exitfuncs()
    except SystemExit as e:
        code = exit_code(e)
    except BaseException:
        pass
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            code = code or 120
    return code


def read_file(path):
    """A file's bytes, through the descriptor alone (no file objects)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        os.close(fd)


def script_dir(path):
    """os.path.dirname(os.path.abspath(path)), by string operations alone
    when path is absolute and already normal (the usual case): posixpath's
    functions cost a fresh fork ~18 copy-on-write faults."""
    if path.startswith("/") and not path.endswith("/") and "//" not in path and "/." not in path:
        return path[: path.rfind("/")] or "/"
    return os.path.dirname(os.path.abspath(path))


def kept_env(env):
    """What an environment means for run_main: sys.dont_write_bytecode, and
    sys.path after the script's directory (PYTHONPATH's entries, then the
    interpreter's own)."""
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    rest = [p for p in sys.path if p != zygote_path0]
    return bool(env.get("PYTHONDONTWRITEBYTECODE")), extra + rest


_kept = kept_env(os.environ)


def run_main(argv, env, source=None):
    """Run argv[0] as __main__ with sys.argv = argv; return the exit status.
    env None keeps the server's own environment (it is the program's);
    source, when given, is the file's contents, already in memory."""
    if env is None:
        # The server's own environment: what it implies was worked out
        # once, before any fork (kept_env).
        bytecode, tail = _kept
    else:
        # Key by key rather than clear() and update(): the same environment
        # in the same order, without MutableMapping's popitem and ABC
        # checks, which touch enough objects to cost ~15 copy-on-write
        # faults a run.
        environ = os.environ
        for k in list(environ):
            del environ[k]
        for k, v in env.items():
            environ[k] = v
        bytecode, tail = kept_env(env)
    sys.dont_write_bytecode = bytecode
    path = argv[0]
    sys.argv = list(argv)
    sys.path[:] = [script_dir(path)] + tail

    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    main.__cached__ = None
    sys.modules["__main__"] = main
    if source is None:
        source = read_file(path)
    compiled = compile(source, path, "exec", dont_inherit=True)
    code = 1
    try:
        exec(compiled, main.__dict__)
        code = 0
    except SystemExit as e:
        code = exit_code(e)
    except KeyboardInterrupt:
        finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException as e:
        import traceback

        # Drop this file's frame so the traceback reads like a script's.
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        code = 1
    return finish(code)


def prepare_forks():
    """Before a fork server's first fork.

    What it holds now lives as long as it does. Frozen out of the
    collector, a child's full collection no longer walks (and so copies)
    every page of it: a child allocating 300,000 small lists took 8,964
    page faults and 65-70 ms instead of 9,700 and 86-102 (forked children
    of a python3 with the worker's modules).

    Then threading's fork hook is made cheap for this server's own forks
    (single_threaded_forks)."""
    gc.collect()
    gc.freeze()
    single_threaded_forks()


# The code threading's after-fork hook runs instead of its own (see
# single_threaded_forks). It runs with threading's globals.
_FAST_AFTER_FORK = """
def _after_fork():
    global _rlm_forked_single_threaded
    if _rlm_forked_single_threaded:
        _rlm_forked_single_threaded = False
        return
    _rlm_full_after_fork()
"""


def single_threaded_forks():
    """Skip threading's after-fork hook in this server's own children.

    When threading is imported (site imports it whenever a .pth file
    pulls in a module that does), os.fork runs threading._after_fork in
    every child. It rebuilds the module's locks and thread table for the
    case where other threads existed at the fork. Its bytecode touches
    enough objects to cost ~100 copy-on-write page faults and ~0.3 ms a
    child (fork-return 220 -> 117 faults, 630 -> 330 us, measured with
    the pyenv 3.11.7 python of BENCHMARKS.md).

    A fork server forks from its only thread, so in its children the hook
    has nothing to do: the copied thread table already holds exactly the
    main thread under the same ident (fork keeps the caller's pthread),
    and no lock can be held by a thread that is gone. So the hook's code is
    replaced by a check of a flag this server sets: set, the child clears
    it and returns; clear (a fork made by a program, which may have
    started threads), the original hook runs in full. A child's own forks
    always see it clear.

    Only for CPython 3.11, whose hook this reasoning was checked against,
    and only when this process has never had another thread; otherwise
    nothing changes."""
    t = sys.modules.get("threading")
    if t is None or sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11):
        return
    hook = getattr(t, "_after_fork", None)
    if type(hook) is not types.FunctionType or hook.__code__.co_freevars:
        return
    main = t.main_thread()
    # The main thread's own lock is in _shutdown_locks in every fresh
    # interpreter (_set_tstate_lock adds it); any other would be a thread's.
    if (t.current_thread() is not main or t.active_count() != 1 or t._limbo
            or not t._shutdown_locks <= {main._tstate_lock}
            or set(t._dangling) != {main}):
        return
    g = hook.__globals__
    g["_rlm_full_after_fork"] = types.FunctionType(
        hook.__code__, g, hook.__name__, hook.__defaults__, hook.__closure__)
    scratch = {}
    exec(compile(_FAST_AFTER_FORK, "<rlm fork server>", "exec"), scratch)
    g["_rlm_forked_single_threaded"] = True
    hook.__code__ = scratch["_after_fork"].__code__


def open_channel(max_bytes, max_fds):
    """Set up the request channel both fork servers read, as the globals
    sock, wake_r and wake_w: a SOCK_SEQPACKET socket on fd 3 (one JSON
    message a request, descriptors attached with SCM_RIGHTS, max_bytes and
    max_fds at most), and a self-pipe that wakes select when a child exits.
    SIGINT is the host's to send to children, never to the server."""
    global sock, wake_r, wake_w, _max_bytes, _max_fds
    sock = socket.socket(fileno=3)
    os.set_inheritable(3, False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _max_bytes, _max_fds = max_bytes, max_fds


def leave_channel():
    """In a forked child, before it runs anything: undo open_channel, so
    the program gets SIGCHLD and SIGINT (KeyboardInterrupt) as a fresh
    interpreter has them and holds none of the server's descriptors."""
    # _signal, not signal: the latter's wrappers convert handlers to enums,
    # which touches enough objects to cost dozens of copy-on-write page
    # faults in every child (see internal/warm's worker.py).
    _signal.set_wakeup_fd(-1)
    _signal.signal(signal.SIGCHLD, _signal.SIG_DFL)
    _signal.signal(signal.SIGINT, signal.default_int_handler)
    sock.close()
    os.close(wake_r)
    os.close(wake_w)


def send(obj):
    sock.send(json.dumps(obj).encode())


def recv():
    """One request: its bytes and the descriptors that came with it."""
    fds = array.array("i")
    msg, anc, _, _ = sock.recvmsg(_max_bytes, socket.CMSG_LEN(_max_fds * fds.itemsize))
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return msg, list(fds)


def serve(reap, handle):
    """The fork servers' loop: say ready, then call reap() whenever a child
    has exited and handle(request, fds) for each request, until the host
    closes its end of the channel (see open_channel)."""
    send({"ready": True})
    while True:
        try:
            r, _, _ = select.select([sock, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in r:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            reap()
        if sock in r:
            msg, fds = recv()
            if not msg:
                return  # the host closed its end: exit
            handle(json.loads(msg), fds)


def child_failed(who, e):
    """Report a failure of the fork server's own code in a forked child (not
    the program's: run_main reports those) on its stderr; the exit status."""
    try:
        os.write(2, ("%s: %s: %s\n" % (who, type(e).__name__, e)).encode())
    except OSError:
        pass
    return 1
