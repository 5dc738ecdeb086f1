# rlm's warm sandbox worker (internal/warm), appended to pymain.py. It runs as
# pid 1 of a namespace sandbox built by internal/sandbox/isolate (bwrap --as-pid-1), so
# nothing inside the sandbox can signal it, and every orphan is its child.
# It does as little as it can per request, because every page it writes
# after a fork is a copy-on-write fault: it forks, reaps and sweeps, and
# the host does the rest through descriptors the worker gives it once.
#
#   worker -> host, first: {"ready": true, "env"} (its environment) on fd
#     3 with descriptors of
#     /workspace, /tmp and /dev/shm (the host lists, collects and wipes
#     their files, and writes a request's input files, through them) and of
#     /proc/sysvipc/{shm,sem,msg} as this sandbox's ipc namespace shows
#     them (the host reads whether a request left SysV IPC objects).
#   host -> worker, on fd 3 (SOCK_SEQPACKET): the request's id in ASCII with stdin,
#     stdout, stderr and the request's own stream socket attached; after
#     the id, a NUL and a header the worker parses and keeps as its preset
#     (only a header made of the sandbox's own settings: spawn_linux.go,
#     header.presettable).
#   worker: forks the request's child. The child reads its header (argv,
#     env or "keep the worker's", rlimits, whether to wait; NUL-separated
#     fields, read_header) from the request socket, or takes the preset
#     when that frame is empty, says "H"
#     there (the host learns its host pid from SCM_CREDENTIALS), waits for
#     "G" when the host must first move it into cgroups of the run's own,
#     sets its rlimits and runs the program: the file as __main__ (mode
#     "python") or an exec of argv (mode "exec").
#   worker, when the child has been reaped: kills every other process of
#     the sandbox if any is left and sends "S ID STATUS LEFTOVERS CPU_NS
#     MAXRSS" on fd 3 (parseStatus). It is then ready for the next request.
#   host -> worker, only when the host found SysV IPC objects left:
#     {"id", "ipc": true}; the worker removes them and answers {"id",
#     "clean": true|false}.
#
# The worker itself never reads a request's code, file contents, arguments
# or environment, so none of it can linger in the memory the next
# request's child inherits (a preset header holds none of them). It
# makes itself non-dumpable, so /proc/1/mem is closed to the programs it
# runs.
import ctypes
import resource
import time

WORKDIR = "/workspace"
SCRATCH = (WORKDIR, "/tmp", "/dev/shm")
PR_SET_DUMPABLE = 4
IPC_RMID = 0

libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
    raise SystemExit("rlm warm worker: prctl(PR_SET_DUMPABLE) failed")

# The channel to the host, fd 3 (SOCK_SEQPACKET). No SIGCHLD handler and no
# select loop: the worker blocks in recvmsg, then in wait4, so between two
# forks it runs only the few lines of main() (see the note below).
sock = socket.socket(fileno=3)
os.set_inheritable(3, False)
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host's to send to children
MODE = sys.argv[1]
FDS_SPACE = socket.CMSG_SPACE(4 * 4)
# The largest control message: a request's id, a NUL and a preset header
# (the host's workerMessageMax, spawn_linux.go).
MESSAGE_MAX = int(sys.argv[2])
# The preset header, parsed (read_header's tuple); None before the first.
PRESET = None
# What a child sets for SIGINT, as plain objects of _signal: signal's are
# enum members, each a page the child would copy to touch.
SIGINT = _signal.SIGINT
DEFAULT_INT = _signal.default_int_handler


# The request socket is used through its descriptor (os.read, os.write),
# not a socket object: every page a forked child or the worker touches
# after a fork is a copy-on-write fault, which on a VM that traps page
# table updates costs tens of microseconds each, and a socket object is
# dozens of them (BENCHMARKS.md, "where the time goes").
def read_exact(fd, n):
    b = os.read(fd, n)
    if len(b) == n:
        return b  # the usual case: no buffer to build
    out = bytearray(b)
    if not b:
        raise EOFError("request socket closed")
    while len(out) < n:
        b = os.read(fd, min(n - len(out), 1 << 20))
        if not b:
            raise EOFError("request socket closed")
        out += b
    return bytes(out)


def read_frame(fd):
    return read_exact(fd, int.from_bytes(read_exact(fd, 4), "big"))


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_header(data):
    """The run's header as the host encodes it (spawn_linux.go, header.encode):
    NUL-terminated fields, split rather than parsed as JSON, which in a
    freshly forked child costs ten times as much in copy-on-write faults.
    Answers (wait, dir, rlimits, argv, env, staged); env None keeps the
    worker's; staged is the name of the code file to write from the next
    frame, or "" when the host wrote the workspace's files."""
    f = data.split(b"\0")
    n = int(f[3])
    rlimits = [(int(f[4 + 3 * j]), int(f[5 + 3 * j]), int(f[6 + 3 * j])) for j in range(n)]
    i = 4 + 3 * n
    a = int(f[i])
    argv = [os.fsdecode(x) for x in f[i + 1:i + 1 + a]]
    i += 1 + a
    env = None
    if f[i] != b"-":
        env = {}
        for kv in f[i + 1:i + 1 + int(f[i])]:
            k, _, v = os.fsdecode(kv).partition("=")
            env[k] = v
    return f[0] == b"1", os.fsdecode(f[1]), rlimits, argv, env, os.fsdecode(f[2])


def child(fds):
    code = 1
    try:
        os.setsid()
        # What a fresh interpreter has: KeyboardInterrupt on SIGINT, and
        # none of the worker's descriptors. _signal, not signal: the
        # latter's wrappers touch enough objects to cost dozens of
        # copy-on-write faults in every child.
        _signal.signal(SIGINT, DEFAULT_INT)
        os.close(3)
        rq = fds[3]
        os.set_blocking(rq, True)
        h = read_frame(rq)
        wait, wdir, rlimits, argv, env, staged = read_header(h) if h else PRESET
        source = read_frame(rq) if staged else None
        os.write(rq, b"H")  # one byte to a blocking socket: all of it
        if wait and read_exact(rq, 1) != b"G":
            os._exit(1)
        os.close(rq)
        if staged:
            # A staged run's code file, written as the sandbox's user
            # before any limit could refuse it.
            staged = wdir + "/" + staged
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            if os.write(fd, source) < len(source):
                write_all(fd, source[os.lseek(fd, 0, os.SEEK_CUR):])
            os.close(fd)
        for res, cur, mx in rlimits:
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
        os.chdir(wdir)
        if MODE == "exec":
            try:
                os.execve(argv[0], argv, os.environ if env is None else env)
            except OSError as e:
                os.write(2, ("rlm: cannot run %s: %s\n" % (argv[0], e.strerror)).encode())
                os._exit(127)
        if not staged or len(argv) < 2 or argv[1] != staged:
            source = None  # the program is another file than the staged one
        code = run_main(argv[1:], env, source)
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


def anyone():
    """Whether any process but this one is left in the sandbox, zombies
    included: kill(-1, 0) reaches them all (they share our uid), and costs
    no objects."""
    try:
        os.kill(-1, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def recv():
    """One message from the host and the descriptors attached to it."""
    fds = array.array("i")
    msg, anc, _, _ = sock.recvmsg(MESSAGE_MAX, FDS_SPACE)
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return msg, list(fds)


def ready():
    """The ready message, with the descriptors the host works through."""
    fds = [os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) for d in SCRATCH]
    for name in ("shm", "sem", "msg"):
        try:
            fds.append(os.open("/proc/sysvipc/" + name, os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            fds.append(os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC))
    # The environment too: a run whose own is the same keeps the worker's.
    msg = json.dumps({"ready": True, "env": dict(os.environ)}).encode()
    sock.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    for fd in fds:
        os.close(fd)


# Every page the worker writes between two forks is a copy-on-write fault
# (hundreds of them cost more than the fork itself), so the loop is plain:
# messages are an id in ASCII ("ipc ID" to remove SysV IPC objects), the
# report is formatted bytes, and orphans are reaped by the same blocking
# wait4 that waits for the child.
def main():
    global PRESET
    prepare_forks()
    ready()
    while True:
        msg, fds = recv()
        if not msg:
            return  # the host closed its end: exit
        if msg.startswith(b"ipc "):
            ok = remove_ipc() and not anyone()
            sock.send(b'{"id":%s,"clean":%s}' % (msg[4:], b"true" if ok else b"false"))
            continue
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            continue
        if b"\0" in msg:
            msg, _, preset = msg.partition(b"\0")
            PRESET = read_header(preset)
        pid = os.fork()
        if pid == 0:
            child(fds)
        for fd in fds:
            os.close(fd)
        while True:
            p, status, ru = os.wait4(-1, 0)
            if p == pid:
                break
        left = 0
        if anyone():
            left = len(others())
            sweep()
        sock.send(b"S %s %d %d %d %d" % (
            msg, status, left, int((ru.ru_utime + ru.ru_stime) * 1e9), ru.ru_maxrss * 1024))


main()
