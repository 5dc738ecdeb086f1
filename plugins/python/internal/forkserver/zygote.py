# rlm's Python fork server. One warm interpreter forks a fresh child per
# program, so a run costs a fork instead of an interpreter start (~1 ms vs
# ~30 ms). Requests arrive on fd 3, a SOCK_SEQPACKET socket, as one JSON
# message each with the child's stdin, stdout and stderr attached
# (SCM_RIGHTS). Replies: {"id", "pid"} after the fork, {"pid", "status"}
# when the child has been reaped.
#
# Only small standard modules are imported here: whatever this process
# imports, every child inherits already imported. plugins/internal/warm's pymain.py
# (run_main: the script semantics) is prepended to this file at start.
import json
import os
import signal
import sys

open_channel(1 << 20, 3)


def child(req, fds):
    code = 1
    try:
        os.setpgid(0, 0)
        leave_channel()
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        os.chdir(req["dir"])
        code = run_main(req["argv"], req["env"])
    except BaseException as e:  # a failure of the fork server itself
        code = child_failed("rlm fork server", e)
    os._exit(code)


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        send({"pid": pid, "status": status})


def handle(req, fds):
    pid = os.fork()
    if pid == 0:
        child(req, fds)
    for fd in fds:
        os.close(fd)
    send({"id": req["id"], "pid": pid})


prepare_forks()
serve(reap, handle)
