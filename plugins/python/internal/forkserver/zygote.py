# rlm's Python fork server. One warm interpreter forks a fresh child per
# program, so a run costs a fork instead of an interpreter start (~1 ms vs
# ~30 ms). Requests arrive on fd 3, a SOCK_SEQPACKET socket, as one JSON
# message each with the child's stdin, stdout and stderr attached
# (SCM_RIGHTS). Replies: {"id", "pid"} after the fork, {"pid", "status"}
# when the child has been reaped.
#
# Only small standard modules are imported here: whatever this process
# imports, every child inherits already imported.
import array
import json
import os
import select
import signal
import socket
import sys

sock = socket.socket(fileno=3)
os.set_inheritable(3, False)
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.signal(signal.SIGINT, signal.SIG_IGN)
zygote_path0 = sys.path[0]


def send(obj):
    sock.send(json.dumps(obj).encode())


def recv():
    fds = array.array("i")
    msg, anc, _, _ = sock.recvmsg(1 << 20, socket.CMSG_LEN(3 * fds.itemsize))
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return msg, list(fds)


def child(req, fds):
    code = 1
    try:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sock.close()
        os.close(wake_r)
        os.close(wake_w)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        os.chdir(req["dir"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.dont_write_bytecode = bool(req["env"].get("PYTHONDONTWRITEBYTECODE"))
        path = req["argv"][0]
        sys.argv = list(req["argv"])
        extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
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
        code = finish(code)
    except BaseException as e:  # a failure of the fork server itself
        try:
            os.write(2, ("rlm fork server: %s: %s\n" % (type(e).__name__, e)).encode())
        except OSError:
            pass
        code = 1
    os._exit(code)


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


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        send({"pid": pid, "status": status})


def main():
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
                return  # the plugin closed its end: exit
            req = json.loads(msg)
            pid = os.fork()
            if pid == 0:
                child(req, fds)
            for fd in fds:
                os.close(fd)
            send({"id": req["id"], "pid": pid})


main()
