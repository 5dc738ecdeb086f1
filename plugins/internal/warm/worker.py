# rlm's warm sandbox worker (internal/warm), appended to pymain.py. It runs as
# pid 1 of a namespace sandbox built by internal/sandbox/isolate (bwrap --as-pid-1), so
# nothing inside the sandbox can signal it, and every orphan is its child.
# It serves one request at a time:
#
#   host -> worker, on fd 3 (SOCK_SEQPACKET): {"id", "mode"} with stdin,
#     stdout, stderr and the request's own stream socket attached.
#   worker: forks the request's child. The child reads its header (argv,
#     env, rlimits, input files) and the files' bytes from the request
#     socket, writes the files, says "H" there (the host learns its host
#     pid from SCM_CREDENTIALS and moves it into the run's cgroups), waits
#     for "G", sets its rlimits and runs the program: the file as __main__
#     (mode "python") or an exec of argv (mode "exec").
#   worker, when the child has been reaped: counts what it left, kills every
#     other process of the sandbox, sends {"id", "status", "cpu_ns",
#     "leftovers", "disk_full", "maxrss"} on fd 3 and the working
#     directory's listing on the request socket.
#   host -> worker: {"id", "finish", "collect"}. With collect, a forked
#     collector reads the wanted paths from the request socket and sends
#     their bytes back. Then the worker wipes /workspace, /tmp and /dev/shm
#     and removes SysV IPC objects, checks that nothing is left, and sends
#     {"id", "clean": true|false}.
#
# The worker itself never reads a request's code or file contents (only
# the child and the collector, which exit), so none of it can linger in the
# memory the next request's child inherits. It makes itself non-dumpable,
# so /proc/1/mem is closed to the programs it runs.
import ctypes
import json
import resource
import struct
import time

WORKDIR = "/workspace"
SCRATCH = (WORKDIR, "/tmp", "/dev/shm")
PR_SET_DUMPABLE = 4
IPC_RMID = 0

libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
    raise SystemExit("rlm warm worker: prctl(PR_SET_DUMPABLE) failed")

open_channel(1 << 16, 4)


# The request socket is used through its descriptor (os.read, os.write),
# not a socket object: every page a forked child or the worker touches
# after a fork is a copy-on-write fault, which on a VM that traps page
# table updates costs tens of microseconds each, and a socket object is
# dozens of them (BENCHMARKS.md, "where the time goes").
def read_exact(fd, n):
    out = bytearray()
    while len(out) < n:
        b = os.read(fd, min(n - len(out), 1 << 20))
        if not b:
            raise EOFError("request socket closed")
        out += b
    return bytes(out)


def read_frame(fd):
    (n,) = struct.unpack(">I", read_exact(fd, 4))
    return read_exact(fd, n)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_frame(fd, data):
    write_all(fd, struct.pack(">I", len(data)) + data)


def child(mode, fds):
    code = 1
    try:
        os.setsid()
        leave_channel()
        rq = fds[3]
        os.set_blocking(rq, True)
        hdr = json.loads(read_frame(rq))
        for f in hdr["files"]:
            path = os.path.join(WORKDIR, f["path"])
            if "/" in f["path"]:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, f["mode"])
            left = f["size"]
            while left > 0:
                b = os.read(rq, min(left, 1 << 20))
                if not b:
                    raise EOFError("request socket closed")
                os.write(fd, b)
                left -= len(b)
            os.close(fd)
            os.utime(path, ns=(f["mtime"], f["mtime"]), follow_symlinks=False)
        write_all(rq, b"H")
        if read_exact(rq, 1) != b"G":
            os._exit(1)
        os.close(rq)
        for res, cur, mx in hdr["rlimits"]:
            resource.setrlimit(res, (cur, mx))
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        # The run shares the sandbox's cgroups with the worker: when it
        # hits the memory limit, the OOM killer must pick one of its
        # processes, never the worker (which would end the sandbox and
        # make a memory limit read as a crash). Raising one's own score is
        # always allowed; the run's processes inherit it, and none can go
        # below the worker's.
        try:
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            os.write(fd, b"1000")
            os.close(fd)
        except OSError:
            pass
        for i, fd in enumerate(fds[:3]):
            os.dup2(fd, i)
            os.close(fd)
        os.chdir(hdr["dir"])
        argv, env = hdr["argv"], hdr["env"]
        if mode == "exec":
            try:
                os.execve(argv[0], argv, env)
            except OSError as e:
                os.write(2, ("rlm: cannot run %s: %s\n" % (argv[0], e.strerror)).encode())
                os._exit(127)
        code = run_main(argv[1:], env)
    except BaseException as e:  # a failure of the fork server itself
        code = child_failed("rlm warm worker", e)
    os._exit(code)


def others():
    return [p for p in os.listdir("/proc") if p.isdigit() and p != "1"]


def sweep():
    """Kill every process of the sandbox but this one and reap them all."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            if not others():
                return
            time.sleep(0.001)  # a process still being reparented to us


def disk_full():
    st = os.statvfs(WORKDIR)  # a tmpfs of the run's disk cap (isolate)
    return st.f_bavail * st.f_frsize < 64 << 10 or st.f_ffree == 0


def listing(limit=100000):
    out = []
    stack = [""]
    while stack and len(out) < limit:
        rel = stack.pop()
        try:
            it = os.scandir(os.path.join(WORKDIR, rel))
        except OSError:
            continue
        with it:
            for e in it:
                r = e.name if not rel else rel + "/" + e.name
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(r)
                    elif e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        out.append([r, st.st_size, st.st_mtime_ns])
                except OSError:
                    pass
    return out


def collector(rq_fd):
    try:
        signal.set_wakeup_fd(-1)
        sock.close()
        rq = rq_fd
        os.set_blocking(rq, True)
        for rel in json.loads(read_frame(rq)):
            try:
                fd = os.open(os.path.join(WORKDIR, rel), os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as f:
                    data = f.read()
            except OSError:
                data = b""
            write_frame(rq, data)
        os._exit(0)
    except BaseException:
        os._exit(1)


def wipe(path, top=True):
    ok = True
    try:
        entries = list(os.scandir(path))
    except OSError:
        return False
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False):
                os.chmod(e.path, 0o700)
                ok = wipe(e.path, False) and ok
                os.rmdir(e.path)
            else:
                os.unlink(e.path)
        except OSError:
            ok = False
    return ok


def ipc_ids(name):
    """The ids of the SysV IPC objects of one kind (shm, sem, msg) in this
    sandbox's ipc namespace; None when the kernel does not list them."""
    try:
        data = read_file("/proc/sysvipc/" + name)  # pymain's
    except OSError:
        return None
    return [int(line.split()[1]) for line in data.splitlines()[1:]]


def remove_ipc():
    removed = False
    for name, rm in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                     ("sem", lambda i: libc.semctl(i, 0, IPC_RMID)),
                     ("msg", lambda i: libc.msgctl(i, IPC_RMID, None))):
        for i in ipc_ids(name) or ():
            rm(i)
            removed = True
    if not removed:
        return True
    return not any(ipc_ids(name) for name in ("shm", "sem", "msg"))


cur = None  # the request being served: {"id", "pid", "rq", "collector"}


def reset():
    global cur
    ok = True
    for d in SCRATCH:
        ok = wipe(d) and ok
    ok = remove_ipc() and ok
    ok = ok and not others()
    os.close(cur["rq"])
    send({"id": cur["id"], "clean": ok})
    cur = None


def reaped(pid, status, ru):
    if cur is None:
        return
    if pid == cur["pid"]:
        left = len(others())
        if left:
            # With no other process in the sandbox there is nothing to
            # kill, and nothing left that could start one.
            sweep()
        send({"id": cur["id"], "status": status, "leftovers": left, "disk_full": disk_full(),
              "cpu_ns": int((ru.ru_utime + ru.ru_stime) * 1e9), "maxrss": ru.ru_maxrss * 1024})
        try:
            write_frame(cur["rq"], json.dumps(listing()).encode())
        except OSError:
            pass
    elif pid == cur.get("collector"):
        cur["collector"] = None
        sweep()
        reset()


def reap():
    while True:
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reaped(pid, status, ru)


def handle(req, fds):
    global cur
    if "finish" in req:
        if cur is None or req["id"] != cur["id"]:
            return
        if req["collect"]:
            pid = os.fork()
            if pid == 0:
                collector(cur["rq"])
            cur["collector"] = pid
        else:
            reset()
        return
    if cur is not None or len(fds) != 4:
        for fd in fds:
            os.close(fd)
        return
    pid = os.fork()
    if pid == 0:
        child(req["mode"], fds)
    for fd in fds[:3]:
        os.close(fd)
    cur = {"id": req["id"], "pid": pid, "rq": fds[3]}


serve(reap, handle)
