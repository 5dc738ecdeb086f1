# Script semantics shared by rlm's Python fork servers: the plain one of
# plugins/python (isolation none) and the sandboxed worker of core/warm.
# run_main runs a file as __main__ in a freshly forked child, the way
# `python3 FILE ARGS...` would: sys.argv, sys.path[0], __file__, the
# environment, tracebacks without this file's frames, SystemExit, atexit
# handlers and non-daemon threads. The caller has already set the standard
# files and the working directory.
import os
import signal
import sys

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
        t = sys.modules.get("threading")
        if t is not None:
            t._shutdown()
    except BaseException:
        pass
    try:
        import atexit

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


def run_main(argv, env):
    """Run argv[0] as __main__ with sys.argv = argv; return the exit status."""
    os.environ.clear()
    os.environ.update(env)
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    path = argv[0]
    sys.argv = list(argv)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    rest = [p for p in sys.path if p != zygote_path0]
    sys.path[:] = [os.path.dirname(os.path.abspath(path))] + extra + rest
    import builtins
    import types

    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    main.__cached__ = None
    sys.modules["__main__"] = main
    with open(path, "rb") as f:
        source = f.read()
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
